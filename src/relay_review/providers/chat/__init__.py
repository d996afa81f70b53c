"""The chat edge: one streamed call (:mod:`.call`), its reply (:mod:`.stream`), what an error
status means (:mod:`.status`), a timeout in words (:mod:`.timeouts`), the key check
(:mod:`.keycheck`) and the structured-output forms (:mod:`.forms`)."""
