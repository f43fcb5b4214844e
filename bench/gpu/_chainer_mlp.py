"""The MNIST-style MLP that the Chainer 1.24 workloads train, as source text for the child processes that run them.

bench/gpu/chainer_proof.py and bench/gpu/chainer_ptx_proof.py (on the GPU) and tests/integration/
test_chainer_recipe.py (on the CPU) run their workload in a fresh Python whose path starts with the built Chainer
wheel, so the model travels as text spliced into each child script, not as an import. The text needs `numpy`,
`chainer`, `F` (chainer.functions) and `L` (chainer.links) imported before it. This module is stdlib-only and not
part of the lgpatch package: the scripts import it from their own folder, the test loads it by path.
"""

# The model: 784 -> hidden -> hidden -> 10 with ReLU (Chainer 1.x style: links given to Chain.__init__).
MLP_CLASS = r'''
class MLP(chainer.Chain):
    def __init__(self, hidden):
        super(MLP, self).__init__(l1=L.Linear(784, hidden), l2=L.Linear(hidden, hidden), l3=L.Linear(hidden, 10))

    def __call__(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))
'''

# Synthetic 'digits' and the epoch loop around L.Classifier(MLP(...)). synthetic_digits draws from the caller's
# RandomState, so what the caller draws afterwards stays the same; train_epochs returns the mean loss of every epoch
# and the last minibatch's loss Variable (callers check its array type and dtype).
TRAINING = r'''
def synthetic_digits(rng, n):
    centers = rng.randn(10, 784).astype(numpy.float32)
    labels = rng.randint(0, 10, size=n).astype(numpy.int32)
    return centers[labels] + rng.randn(n, 784).astype(numpy.float32), labels


def train_epochs(model, optimizer, x, t, batch, epochs=4):
    losses = []
    for epoch in range(epochs):
        total = 0.0
        for i in range(0, len(t), batch):
            model.cleargrads()
            loss = model(x[i:i + batch], t[i:i + batch])
            loss.backward()
            optimizer.update()
            total += float(loss.data)
        losses.append(total / (len(t) // batch))
    return losses, loss
'''
