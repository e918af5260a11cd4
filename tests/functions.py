"""Small custom autograd.Functions the tests share (each is one opaque call in a graph: they opt
out of being traced), and
a torch.library custom op with register_autograd (its backward traced into the graph)."""
import torch


class Double(torch.autograd.Function):
    compiled_bw_traceable = False     # an opaque call is the point here
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class ToBoth(torch.autograd.Function):
    """a + b; its backward returns its one grad for both inputs."""
    compiled_bw_traceable = False
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        return g, g


class Triple(torch.autograd.Function):
    compiled_bw_traceable = False     # an opaque call is the point here
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3


@torch.library.custom_op("cbw_test::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x.sin() * alpha


@scaled_sin.register_fake
def _(x, alpha):
    return torch.empty_like(x)


def _sin_setup(ctx, inputs, output):
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.alpha = alpha


def _sin_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * x.cos() * ctx.alpha, None


scaled_sin.register_autograd(_sin_backward, setup_context=_sin_setup)


class WritesItsGrad(torch.autograd.Function):
    """A backward Dynamo finds traceable that writes into its grad in place (`g.mul_(2)`)."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g.mul_(2)
