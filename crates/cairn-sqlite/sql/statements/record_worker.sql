INSERT INTO workers (id, host, pid, started_at, last_seen, live_until, serves)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
    ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
        started_at = excluded.started_at, last_seen = excluded.last_seen,
        live_until = excluded.live_until, serves = excluded.serves
