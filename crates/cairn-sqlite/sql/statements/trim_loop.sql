DELETE FROM journal WHERE run_id = ?1 AND seq > ?2 AND seq <= ?3
    AND (substr(path, 1, length(?4)) = ?4 OR (kind = 'loop_checkpoint' AND path = ?5)
         OR kind = 'var_set')
