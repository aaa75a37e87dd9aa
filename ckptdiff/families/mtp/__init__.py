"""MTP heads: the next-token-prediction layers a target checkpoint carries (DeepSeek-V3/GLM
``model.layers.{N+i}.{enorm,hnorm,eh_proj,shared_head.*}``, Qwen3-Next ``mtp.*``), served as their own drafter."""
