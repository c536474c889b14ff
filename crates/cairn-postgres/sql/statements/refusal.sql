SELECT epoch, last_seq, status FROM runs WHERE id = $1
