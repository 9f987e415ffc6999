"""`torch.utils.checkpoint`'s spelling of the engine's checkpointing (the same objects).

>>> from rtxviz.utils.checkpoint import checkpoint
>>> from rtxviz import Tensor, Variable
>>> x = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2]), name="x")
>>> y = checkpoint(lambda t: (t * t).sum(), x, use_reentrant=False)
>>> y.backward(); x.grad.tolist()
[2.0, 4.0]
"""

from ..engine.checkpoint import *  # noqa: F403 - the whole public surface, by design
from ..engine.checkpoint import __all__  # noqa: F401
