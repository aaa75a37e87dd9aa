"""Limits every reader shares: the biggest JSON file read, the slowest body accepted (light: no other import)."""

#: The most bytes ckptdiff reads of a config.json or an index: the limit the reference puts on a header.
MAX_JSON_BYTES = 100_000_000
#: The slowest average rate a body may arrive at, past its read timeout's grace, on any transport: slower is
#: a trickling server, reported as a timeout.
MIN_BODY_RATE = 16 * 1024
#: Config counts ckptdiff's rules loop over (decoder layers, MTP layers, routed experts), and the most accepted in
#: a config.json at any depth: each is far past any published model (DeepSeek-V3: 61 layers, 256 experts, one MTP
#: layer); a hostile config's 10**9 would be a loop, and a list of names, that long.
MAX_CONFIG_COUNTS = {
    "num_hidden_layers": 4096,
    "num_nextn_predict_layers": 256,
    "num_mtp_layers": 256,
    "n_routed_experts": 4096,
    "num_experts": 4096,
    "num_local_experts": 4096,
}
#: Sizes, counts and ids the families' rules read as integers (the drafter's and the base's dimensions,
#: vocabularies, layers, heads, experts, MTP layers, DFlash's settings): set (not null) at any depth of a config.json,
#: each must be a JSON integer, not "7168", 7168.0, true or NaN (the rules would take such a value as unset and
#: compare nothing). The counts of MAX_CONFIG_COUNTS are among them. DFlash's block_size is not: SGLang parses it with
#: int() ("16" is 16) and refuses what int() does not take (a config check), vLLM's DFlash drafter never reads it.
CONFIG_INTEGERS = frozenset(MAX_CONFIG_COUNTS) | {
    "hidden_size",
    "target_hidden_size",
    "vocab_size",
    "draft_vocab_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_aux_hidden_states",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "num_target_layers",
    "mask_token_id",
}
#: Of those, the ones that can be below zero: a token id, which some exports set to -1 for "none".
SIGNED_CONFIG_INTEGERS = frozenset({"mask_token_id"})
#: Of those, the sizes no model has at zero: the rules read each as unset when it is 0 (``hidden_size or ...``), so
#: a 0 would compare nothing and the engines' replays would say the key is missing. Counts (MTP layers, experts: 0 is
#: a dense model), ranks and ids may be 0.
POSITIVE_CONFIG_INTEGERS = frozenset(
    {
        "hidden_size",
        "target_hidden_size",
        "vocab_size",
        "draft_vocab_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
    }
)
#: Lists of target-layer ids a drafter's config names (EAGLE-3's aux ids, DFlash's target layers), and the most
#: entries accepted: real drafters name 3 to 8; the capture check's work grows with each id.
MAX_LAYER_ID_LISTS = {
    "eagle_aux_hidden_state_layer_ids": 256,
    "layer_ids": 256,
    "target_layer_ids": 256,
}

#: Layer-id lists whose ids may be strings: DFlash's ``target_layer_ids``, which SGLang int()s ("3" passes) and vLLM
#: raises on, as their rules say.
STRING_LAYER_ID_KEYS = frozenset({"target_layer_ids"})

#: The keys an EAGLE-3 drafter's aux-layer ids are read from: a value other than a list (or null) is refused, since
#: the rules would take it as no ids. DFlash's ``target_layer_ids`` is left to its engines' rules, which raise on it.
EAGLE_LAYER_ID_KEYS = frozenset({"eagle_aux_hidden_state_layer_ids", "layer_ids"})
