"""Containers: build the stack images and run the benchmark in them (`kit image`, `kit launch`).

One module per step:

- ``stacks``       stack name -> image tag, lock file, Dockerfile build arguments
                   (facts from kit/facts/stacks.py); ``apex_archive``: a local Apex source
- ``engine``       connect to Docker; the table from engine messages to KitErrors
- ``build``        stream a classic-builder build with progress; list the images
- ``launcher``     `kit launch`'s flow: checks -> image -> container on the requested GPU(s)
                   -> progress -> bundle; ``resume``: a resumed run's folder and the command
                   that continues a run
- ``container``    the container's life; ``follow``: its run's journal.jsonl in the mounted
                   results folder; ``exit_status``: its exit code read on the host
- ``display``, ``ui``  what `kit launch` and `kit image build` show (rich)

The docker SDK and rich are imported inside functions, so importing this
package costs nothing at `kit` start-up.
"""
