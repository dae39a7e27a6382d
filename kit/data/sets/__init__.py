"""The data sets, one module (or package) each, whose ``DATASET`` kit.data.registry finds."""
