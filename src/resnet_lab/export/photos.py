"""Real photographs for the agreement check of reduced-precision and engine rows: the two sample images
scikit-learn ships (``sklearn.datasets.load_sample_images``: a Chinese temple and a flower, 427×640 JPEGs, read
from its files), each cut into :data:`CROPS` square crops of several sizes and places and resized to the model's
input side, in [0, 1].

Random noise is a poor probe of a reduced-precision path: its activations have no structure, its classes no
margin. Photographs have edges, textures and smooth regions, as a deployed model's inputs do; scikit-learn is
already a dependency (04's digits), so no download is needed.
"""

from __future__ import annotations

from typing import Any

# (side as a share of the shorter edge, left as a share of the free width, top as a share of the free height)
CROPS = ((1.0, 0.0, 0.0), (1.0, 0.5, 0.0), (1.0, 1.0, 0.0), (0.75, 0.2, 0.2), (0.75, 0.8, 0.8),
         (0.5, 0.1, 0.5), (0.5, 0.5, 0.5), (0.5, 0.9, 0.1))
COUNT = 2 * len(CROPS)


SAMPLES = ("china.jpg", "flower.jpg")  # scikit-learn's sklearn/datasets/images/, as load_sample_images reads them


def sample_images() -> list[Any]:
    """The sample images as uint8 arrays, read from scikit-learn's installed files without importing it (a
    Keras child blocks that import: resnet_lab.core.child.UNUSED)."""
    from importlib import metadata

    import numpy as np
    from PIL import Image

    dist = metadata.distribution("scikit-learn")
    return [np.asarray(Image.open(dist.locate_file(f"sklearn/datasets/images/{name}")).convert("RGB"))
            for name in SAMPLES]


def photographs(size: int, layout: str = "channels_last") -> Any:
    """(:data:`COUNT`, size, size, 3) float32 in [0, 1] (NCHW where ``layout`` is channels_first): every crop of
    :data:`CROPS` of each sample image, resized with PIL's bilinear filter."""
    import numpy as np
    from PIL import Image

    out = []
    for photo in sample_images():
        h, w = photo.shape[:2]
        for share, left, top in CROPS:
            side = round(min(h, w) * share)
            x0, y0 = round((w - side) * left), round((h - side) * top)
            crop = Image.fromarray(photo[y0:y0 + side, x0:x0 + side]).resize((size, size), Image.BILINEAR)
            out.append(np.asarray(crop, dtype=np.float32) / 255.0)
    batch = np.stack(out)
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2)) if layout == "channels_first" else batch


def run_in_batches(call: Any, images: Any, batch_size: int) -> Any:
    """``call`` (a compiled model of a fixed batch size) over ``images`` (a numpy array or a torch tensor),
    ``batch_size`` at a time, the last chunk filled up with the first images; the logits of ``images`` only, as one
    numpy array (``call`` returns an array each time)."""
    import numpy as np

    n = len(images)
    chunks = -(-n // batch_size)
    order = [i % n for i in range(chunks * batch_size)]
    outs = []
    for c in range(chunks):
        chunk = images[order[c * batch_size:(c + 1) * batch_size]]
        outs.append(np.asarray(call(np.ascontiguousarray(chunk) if isinstance(chunk, np.ndarray) else chunk)))
    return np.concatenate(outs)[:n]
