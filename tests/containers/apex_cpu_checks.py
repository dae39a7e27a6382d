"""The kit's fp16-master loss scaling beside Apex's own code, on the CPU (no GPU needed).

Run two ways, with the same checks:
- inside the cuda10 and cuda12 images built with Apex (tests/containers/test_cuda10_stack.py,
  test_cuda12_stack.py):
  ``python apex_cpu_checks.py`` imports the image's installed Apex (apex.amp,
  apex.fp16_utils.FP16_Optimizer) and torch 1.4, and the kit from /opt/kit/src;
- in `make test` (tests/test_apex_scaler_oracle.py), against the loss_scaler.py of
  Apex's source at commit 241dd6c4 (tests/fixtures/originals.py), on today's torch.

Checks: (1) the scale's trajectory under the kit's LossScaler equals Apex's
DynamicLossScaler over thousands of steps with overflows at chosen steps; (2) the
kit's overflow flag (MasterWeights.grads_to_master) agrees with Apex's
has_overflow on the same gradients, and the master gradients are the model's
divided by the scale; (3) a static scale never changes and is never checked.
Python 3.7 syntax (the cuda10 image runs it). Prints one line per check; exit 1
on the first disagreement.
"""

from __future__ import print_function

import sys


def scale_trajectory_matches(apex_scaler_cls, steps=5000, overflow_at=(3, 4, 5, 1200, 1201, 2500, 4999)):
    from kit.bench.precision import LossScaler

    ours = LossScaler()
    theirs = apex_scaler_cls()
    assert ours.scale == theirs.loss_scale, (ours.scale, theirs.loss_scale)
    for i in range(steps):
        overflow = i in overflow_at
        ours.update(overflow)
        theirs.update_scale(overflow)
        if ours.scale != theirs.loss_scale:
            raise AssertionError("step {}: kit scale {} != Apex {}".format(i, ours.scale, theirs.loss_scale))
    return "scale after {} steps with {} overflows: {} (both)".format(steps, len(overflow_at), ours.scale)


def overflow_check_matches(apex_scaler_cls):
    import torch

    from kit.bench.precision import MasterWeights

    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(17, 5)), torch.nn.Parameter(torch.randn(33))]
    master = MasterWeights(params)
    theirs = apex_scaler_cls()
    seen = []
    for poison in (None, float("inf"), float("nan"), None):
        for p in params:
            p.grad = torch.randn_like(p) * 1024.0
        if poison is not None:
            params[1].grad[7] = poison
        scaled = [p.grad.clone() for p in params]  # (fp32 params share their grad with the master copy)
        apex_says = bool(theirs.has_overflow(params))
        found = bool(master.grads_to_master(1024.0).item())
        if found != apex_says:
            raise AssertionError("grads with {}: kit overflow {} != Apex {}".format(poison, found, apex_says))
        if poison is None:
            for g, mp in zip(scaled, master.master_params):
                if not torch.allclose(mp.grad, g.float() / 1024.0):
                    raise AssertionError("master grads are not the model grads / scale")
        seen.append(found)
    return "overflow flags (clean, inf, nan, clean): {} (both)".format(seen)


def static_scale_is_never_checked():
    from kit.bench.precision import LossScaler

    s = LossScaler(scale=512.0, dynamic=False)
    for overflow in (True, False, True):
        s.update(overflow)
    if s.scale != 512.0:
        raise AssertionError("a static scale changed: {}".format(s.scale))
    return "static 512 stays 512"


def run(apex_scaler_cls):
    out = []
    for check in (lambda: scale_trajectory_matches(apex_scaler_cls), lambda: overflow_check_matches(apex_scaler_cls),
                  static_scale_is_never_checked):
        out.append(check())
    return out


def main():
    import apex  # noqa: F401
    from apex import amp  # noqa: F401  (what apex-o1/apex-o2 use)
    from apex.fp16_utils import FP16_Optimizer  # noqa: F401  (what the example's --fp16 uses)
    from apex.fp16_utils.loss_scaler import DynamicLossScaler

    print("imported apex.amp and apex.fp16_utils.FP16_Optimizer from", apex.__file__)
    try:
        for line in run(DynamicLossScaler):
            print("ok:", line)
    except AssertionError as exc:
        print("FAILED:", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
