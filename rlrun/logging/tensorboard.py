"""TensorBoard event files in ``<run dir>/tensorboard`` (torch's SummaryWriter; no TensorFlow needed)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

from rlrun.errors import one_line
from rlrun.logging.fanout import RunContext, warn
from rlrun.metric_names import EVAL_VIDEO


def _writer_thread_errors_once(args: Any, previous: Any = threading.excepthook) -> None:
    """``threading.excepthook`` without the traceback of TensorBoard's writer thread when a write fails (a full
    disk): TensorBoard raises that error again in the run's next ``add_*`` call, where the run reports it in one
    line. Every other thread's error goes to the hook as before."""
    if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
        return
    previous(args)


class TensorBoardSink:
    keeps_artifacts: ClassVar[bool] = False

    @classmethod
    def from_config(cls, cfg: Any, context: RunContext) -> TensorBoardSink:
        return cls(cfg, context.run_dir)

    def __init__(self, cfg: Any, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=int(cfg.flush_secs))
        if threading.excepthook is threading.__excepthook__:  # the default: not replaced by someone else
            threading.excepthook = _writer_thread_errors_once
        self.params: dict[str, Any] = {}
        self.scalar_tags: set[str] = set()
        self.videos = True  # false once a video could not be converted (said once)

    def log_params(self, params: dict[str, Any]) -> None:
        self.params = {k: v for k, v in params.items() if isinstance(v, (int, float, str, bool))}
        text = "\n".join(f"    {k}: {v}" for k, v in params.items())
        self.writer.add_text("config", text, 0)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.scalar_tags.update(metrics)

    def log_videos(self, paths: list[Path], step: int) -> None:
        """An evaluation's first episode as an animated GIF in the Images tab (``eval/video``), as
        ``add_video`` writes one; not ``add_video`` itself, which needs moviepy 1's ``moviepy.editor`` (the video
        extra installs moviepy 2) and otherwise prints a line and writes nothing. The mp4 is read back with
        imageio's ffmpeg (both come with moviepy) and encoded with Pillow: well under a second for a CartPole
        episode; the mp4 files of every episode stay in the run directory."""
        if not paths or not self.videos:
            return
        try:
            self.writer.file_writer.add_summary(_gif_summary(EVAL_VIDEO, paths[0]), step)
        except Exception as e:  # noqa: BLE001 - a video must never stop a run
            warn(f"TensorBoard: evaluation videos are off for this run ({one_line(e, 200)}); the mp4 files are in "
                 f"{Path(paths[0]).parent.parent}.")
            self.videos = False

    def close(self, summary: dict[str, Any], status: str) -> None:
        if self.params and self.scalar_tags:
            self._write_hparams()
        self.writer.close()

    def _write_hparams(self) -> None:
        """The HParams dashboard's entry for this run, in the run's own event file: its parameters, and as its
        metrics the scalars the run logged (the dashboard shows their last values). Not ``add_hparams``, which
        writes a second run (``tensorboard/hparams``) of one-point ``hparam/*`` charts. Booleans go as text
        (``True``/``False``): torch's ``hparams`` takes a bool for a number (FLOAT64)."""
        from torch.utils.tensorboard.summary import hparams

        params = {k: str(v) if isinstance(v, bool) else v for k, v in self.params.items()}
        metrics = {tag: 0.0 for tag in sorted(self.scalar_tags)}  # names only: the values are the logged scalars
        for part in hparams(params, metrics):
            self.writer.file_writer.add_summary(part)


def _gif_summary(tag: str, mp4: Path) -> Any:
    """A TensorBoard image summary holding the mp4's frames as an animated GIF (what ``add_video`` writes)."""
    import io

    import imageio
    from PIL import Image
    from tensorboard.compat.proto.summary_pb2 import Summary

    reader = imageio.get_reader(str(mp4), "ffmpeg")
    try:
        fps = float(reader.get_meta_data().get("fps") or 30)
        frames = [Image.fromarray(frame) for frame in reader]
    finally:
        reader.close()
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    image = Summary.Image(height=frames[0].height, width=frames[0].width, colorspace=3,
                          encoded_image_string=buffer.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])
