CREATE FUNCTION {schema}.flow_take(w TEXT, k TEXT, n INTEGER) RETURNS INTEGER LANGUAGE plpgsql AS $$
    DECLARE free BIGINT;
    BEGIN
        INSERT INTO {schema}.concurrency_slots (workflow, key) VALUES (w, k) ON CONFLICT DO NOTHING;
        SELECT coalesce((SELECT lim FROM {schema}.concurrency_rules WHERE workflow = w), 1000000000) - held INTO free
            FROM {schema}.concurrency_slots WHERE workflow = w AND key = k FOR UPDATE;
        IF free <= 0
            OR EXISTS (SELECT 1 FROM {schema}.runs WHERE workflow = w AND flow_key = k AND waiting_for IS NOT NULL) THEN
            RETURN 0;
        END IF;
        free := least(free, n);
        UPDATE {schema}.concurrency_slots SET held = held + free WHERE workflow = w AND key = k;
        RETURN free;
    END $$;
    CREATE FUNCTION {schema}.flow_give(w TEXT, k TEXT, n INTEGER) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {schema}.concurrency_slots SET held = held - n WHERE workflow = w AND key = k;
    END $$;