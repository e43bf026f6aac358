package dispatch

// WriterBusy reports whether partition p's writer lock is held here (a
// write of the partition is in progress): for tests that must know a
// write is waiting for etcd.
func (d *Dispatcher) WriterBusy(p int) bool {
	d.mu.Lock()
	pt := d.parts[p]
	d.mu.Unlock()
	if pt == nil {
		return false
	}
	if pt.wmu.TryLock() {
		pt.wmu.Unlock()
		return false
	}
	return true
}
