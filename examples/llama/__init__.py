"""A Llama trained with Liger-Kernel's Triton kernels declared with opsmith (``kernels.py``) and swapped into a
``transformers`` model (``model.py``): the recipe of docs/llama.md, measured by benchmarks/bench_llama.py."""
