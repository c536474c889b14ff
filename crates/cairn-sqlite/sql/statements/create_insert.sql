INSERT INTO runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at, last_seq,
        deadline_at, retention_ms, restarted_from, parent, continued_from, flow_key, flow_hold, waiting_for,
        priority, fair_key, fair_seq, suspend_reason, wake_at, debounce_key, debounce_until)
    VALUES (?1, ?2, ?3, ?18, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
        CASE WHEN ?23 THEN 'concurrency' END, ?15, ?16, ?17, ?19, ?20, ?21, ?22)
    ON CONFLICT (id) DO NOTHING
