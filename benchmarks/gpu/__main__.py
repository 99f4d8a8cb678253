import sys

from benchmarks.gpu.kit import main

sys.exit(main())
