INSERT INTO journal (run_id, seq, at, kind, path, data)
                 SELECT $1, seq, $2, kind, path, data
                 FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) AS e(seq, kind, path, data)