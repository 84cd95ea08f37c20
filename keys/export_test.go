package keys

// SetCacheSize sets the most entries r caches.
func SetCacheSize(r *Resolver, n int) { r.max = n }

// CacheLen returns how many entries r caches.
func CacheLen(r *Resolver) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cache)
}
