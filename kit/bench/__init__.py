"""The benchmark runner: the only part of the kit that imports torch, torchvision,
fastai or apex. Nothing here is imported at `kit` start-up; the runner imports
kit.bench.api when the first cell starts."""
