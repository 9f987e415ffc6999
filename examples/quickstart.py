"""The spec's basic example: z = sum(x * w); dz/dx = w, dz/dw = x.

Run: python examples/quickstart.py
"""

from rtxviz import Device, Tensor, Variable

device = Device.cpu()

# Create tracked variables
x = Variable.from_tensor(Tensor.from_slice([2.0, 3.0], [2], device))
w = Variable.from_tensor(Tensor.from_slice([1.0, 2.0], [2], device))

# Forward pass builds the graph
y = x.multiply(w)  # [2.0, 6.0]
z = y.sum()  # 8.0

# Backward pass computes gradients
z.backward()

print("z: ", z.item())
print("dx:", x.grad.tolist(), "(dz/dx = w)")
print("dw:", w.grad.tolist(), "(dz/dw = x)")
