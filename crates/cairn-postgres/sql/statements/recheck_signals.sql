UPDATE runs SET wake_at = $2
                 WHERE id = $1 AND epoch = $3 AND status = 'suspended' AND (wake_at IS NULL OR wake_at > $2)
                   AND EXISTS (SELECT 1 FROM signals g
                               WHERE g.run_id = $1 AND g.consumed_seq IS NULL AND g.id > $4)