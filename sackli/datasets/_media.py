"""The image and video codecs of `bags` 0.5.1: `jpeg`, `png` and `mp4(fps)`.

Pillow and PyAV are imported on first use, so sackli.datasets works without
them; using a codec whose library is missing raises an ImportError that names
the extra to install. The encoders call the libraries exactly as `bags` does,
so the same library versions write the same bytes. One difference: mp4's
frame rate is passed as a fraction, since recent PyAV (18 here) refuses the
float `bags` passes, so `bags` cannot write mp4 with it at all. As in `bags`
0.5.1, the argument of `jpeg(quality)` is accepted but not used: Pillow's default
quality applies, which keeps files byte-identical to those `bags` writes.
"""

from __future__ import annotations

import fractions
import io
from typing import Any

from ._codecs import needs_numpy

__all__ = ["image_decode", "jpeg_encode", "mp4_decode", "mp4_encode", "png_encode"]


def _pillow_image() -> Any:
    try:
        from PIL import Image
    except ImportError as error:
        raise ImportError(
            "the jpeg and png codecs need Pillow: pip install 'sackli-bagz[images]'") from error
    return Image


def _av() -> Any:
    try:
        import av
    except ImportError as error:
        raise ImportError("the mp4 codec needs PyAV: pip install 'sackli-bagz[video]'") from error
    return av


def _image_encode(value: Any, image_format: str) -> bytes:
    stream = io.BytesIO()
    _pillow_image().fromarray(value).save(stream, format=image_format)
    return stream.getvalue()


def jpeg_encode(value: Any, *args: str) -> bytes:
    """`jpeg(quality)`: a uint8 array (H, W) or (H, W, 3) as a JPEG image
    (at Pillow's default quality, as `bags` 0.5.1 writes it)."""
    return _image_encode(value, "JPEG")


def png_encode(value: Any, *args: str) -> bytes:
    """`png`: a uint8 array (H, W), (H, W, 3) or (H, W, 4) as a PNG image."""
    return _image_encode(value, "PNG")


def image_decode(buffer: bytes, *args: str) -> Any:
    """`jpeg` / `png`: the image as a writable numpy array (the pixels
    `bags` gives, which are read-only there).

    Pillow hands numpy its pixels as immutable bytes; copying them once
    costs a small part of decoding the image (docs/datasets.md).
    """
    np = needs_numpy()
    return np.array(_pillow_image().open(io.BytesIO(buffer)))


def mp4_encode(array: Any, fps: str | float = 15) -> bytes:
    """`mp4(fps)`: uint8 frames (T, H, W, 3) as an MPEG-4 video."""
    av = _av()
    # bags passes float(fps), which recent PyAV refuses; the same rate as an
    # exact fraction is accepted.
    rate = fractions.Fraction(str(fps))
    frames, height, width = array.shape[:3]
    stream_file = io.BytesIO()
    output = av.open(stream_file, mode="w", format="mp4")
    stream = output.add_stream("mpeg4", rate=rate)
    stream.width = width
    stream.height = height
    stream.pix_fmt = "yuv420p"
    for t in range(frames):
        frame = av.VideoFrame.from_ndarray(array[t], format="rgb24")
        frame.pts = t
        output.mux(stream.encode(frame))
    output.mux(stream.encode(None))  # drains the encoder
    output.close()
    return stream_file.getvalue()


def mp4_decode(buffer: bytes, *args: str) -> Any:
    """`mp4`: the video's frames as a uint8 array (T, H, W, 3)."""
    np = needs_numpy()
    container = _av().open(io.BytesIO(buffer))
    try:
        stream = container.streams.video[0]
        array = np.empty((stream.frames, stream.height, stream.width, 3), dtype=np.uint8)
        for t, frame in enumerate(container.decode(video=0)):
            array[t] = frame.to_ndarray(format="rgb24")
    finally:
        container.close()
    return array
