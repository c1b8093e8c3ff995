"""NVIDIA's CuTe DSL (the `cute` language): its run, capture and stages."""
