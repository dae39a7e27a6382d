"""The range a measured figure can physically take: what `kit bundle verify`, `kit compare` and the
results index accept of a stranger's throughput, time or energy.

A bundle or an index can hold any number JSON or SQLite can write: 1e300 items/s is finite and
positive, and a ratio of it to 1e-300 overflows every statistic computed from it. Each bound below
is far outside anything a benchmark of the kit can measure, so a real run never meets one, and a
number beyond it is refused where it enters (kit.results.plausible), never carried into arithmetic.

Sources and reasoning, one per bound:

- **Throughput, at most 1e12 items/s.** The fastest accelerator the kit can run on trains at a few
  PFLOP/s: 4.5e15 dense FP8 FLOP/s for an NVIDIA B200 (NVIDIA B200 datasheet, 2024; H100 SXM: 1.98e15,
  H100 datasheet). The cheapest item any suite counts costs millions of FLOPs to train: a 32x32
  CIFAR image through ResNet-18 about 2e8 (kit.facts.models: 1.81 GMACs at 224x224, scaled to 32x32,
  x6 for training), a token of the smallest LSTM or GPT preset more than 1e6 (6 FLOPs per parameter
  per token, Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1). So eight
  such GPUs at their peak stay below 1e11 items/s of the cheapest item; 1e12 leaves ten times that.
- **Throughput, at least 1e-6 items/s.** One item in 11.6 days: no cell of the kit runs that long
  (below), so no cell can have measured a slower rate.
- **A time, at most 1e7 s** (116 days; an epoch, a steady window, the time to the first step, a fit).
  The longest cell of the kit's suites on the slowest host it supports, a 2-core CPU machine, takes
  hours (references/cpu-vm/estimates/), and a cluster's jobs are limited to days.
- **A time, at least 1e-9 s.** A nanosecond: launching one GPU kernel alone takes microseconds, and
  every interval the kit times holds at least one training step.
- **Energy, at most 1e12 J per epoch** (about 278 MWh): a 10 kW node (eight 1 kW GPUs and the host;
  NVIDIA DGX B200 system: 14.3 kW) busy for the longest time above (1e7 s) uses 1e11 J.
- **Energy, at least 1e-6 J per epoch.** A microjoule: a GPU idles at tens of watts (NVML's power
  reading of any data-centre GPU), so even a microsecond epoch costs more.
- **A host name, at most 253 characters**: the longest DNS name (RFC 1035, section 2.3.4, 255 octets in
  wire form, 253 characters as text; Linux's own HOST_NAME_MAX is 64, limits.h).
"""

from __future__ import annotations

#: items (images, tokens) per second
MIN_THROUGHPUT = 1e-6
MAX_THROUGHPUT = 1e12
#: seconds: an epoch, a steady window, the time to the first step, a fit
MIN_SECONDS = 1e-9
MAX_SECONDS = 1e7
#: joules per epoch
MIN_ENERGY_J = 1e-6
MAX_ENERGY_J = 1e12
#: characters
MAX_HOST_NAME = 253
