"""Environment factories: build single and vectorised gymnasium environments from an env config node."""
