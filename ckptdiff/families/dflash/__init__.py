"""DFlash drafters (block-diffusion drafting over a target's hidden states: vLLM ``qwen3_dflash.py``, SGLang
``dflash.py``): detected and compared; their engine loading is not modelled yet, and ``--engine`` says so."""
