SELECT max(coalesce((SELECT fair_seq + 1 FROM runs INDEXED BY runs_fair
              WHERE status = 'pending' AND waiting_for IS NULL AND priority = ?1 AND fair_key = ?2
              ORDER BY fair_seq DESC LIMIT 1), 0),
    coalesce((SELECT fair_seq FROM runs INDEXED BY runs_ready
              WHERE status = 'pending' AND waiting_for IS NULL AND priority = ?1
              ORDER BY priority DESC, fair_seq LIMIT 1), 0))
