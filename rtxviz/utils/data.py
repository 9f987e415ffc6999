"""`torch.utils.data`'s spelling of `rtxviz.data` (the same objects).

>>> from rtxviz.utils.data import TensorDataset, random_split
>>> from rtxviz import Tensor
>>> [len(part) for part in random_split(TensorDataset(Tensor.ones([10, 2])), [0.7, 0.3])]
[7, 3]
"""

from ..data import *  # noqa: F403 - the whole public surface, by design
from ..data import __all__  # noqa: F401
