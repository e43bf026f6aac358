package store

// WorkersPrefix is the prefix of every worker registration.
func (k Keys) WorkersPrefix() string { return k.NS + "workers/" }

// Worker is the key of worker id's registration.
func (k Keys) Worker(id string) string { return k.WorkersPrefix() + EscapeID(id) }
