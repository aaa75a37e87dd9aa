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
#: Lists of target-layer ids a drafter's config names (EAGLE-3's aux ids, DFlash's target layers), and the most
#: entries accepted: real drafters name 3 to 8; the capture check's work grows with each id.
MAX_LAYER_ID_LISTS = {
    "eagle_aux_hidden_state_layer_ids": 256,
    "layer_ids": 256,
    "target_layer_ids": 256,
}
