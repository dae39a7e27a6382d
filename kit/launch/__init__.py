"""Containers: build the stack images and run the benchmark in them (`kit image`, `kit launch`).

One module per step:

- ``stacks``   stack name -> image tag, lock file, Dockerfile build arguments
               (facts from kit/facts/stacks.py)
- ``engine``   connect to Docker; the table from engine messages to KitErrors
- ``build``    stream a classic-builder build with progress; list the images
- ``follow``   tail a run's journal.jsonl in the mounted results folder
- ``launcher`` checks -> image -> container on the requested GPU(s) -> progress
               -> bundle
- ``ui``       the rich displays

The docker SDK and rich are imported inside functions, so importing this
package costs nothing at `kit` start-up.
"""
