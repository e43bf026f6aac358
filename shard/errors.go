package shard

import "errors"

// Errors returned by this package. Callers compare with errors.Is.
var (
	// ErrInvalidConfig means a configuration failed validation.
	ErrInvalidConfig = errors.New("shard: invalid config")
	// ErrPartitionMismatch means the cluster in etcd was created with a
	// different partition count than this member was started with.
	ErrPartitionMismatch = errors.New("shard: partition count mismatch")
	// ErrFenced means a fenced transaction was refused because the owner
	// key no longer has the epoch it was made under: ownership was lost.
	ErrFenced = errors.New("shard: fenced: partition ownership lost")
	// ErrRefenced means a fenced transaction was refused because this
	// ownership was re-fenced (Ownership.Refence) after the transaction
	// was composed: it was not applied, the partition is still owned, and
	// the write may be tried again.
	ErrRefenced = errors.New("shard: refused: the ownership was re-fenced after this write was composed")
)
