"""DFlash drafters (block-diffusion drafting over a target's hidden states): the spec read from config.json and
names (``spec.py``), the checks (``profile.py``), vLLM's ``qwen3_dflash.py`` and SGLang's ``dflash.py`` loaders as
data (``engines/``), and their words."""
