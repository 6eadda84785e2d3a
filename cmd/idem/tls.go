package main

import (
	"crypto/tls"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// servedCert is the certificate idem proxy serves TLS with (--tls-cert,
// --tls-key): read at start-up, and read again when either file changes,
// so that a certificate renewed in place (by an ACME client, or a mounted
// secret updated) is served to the next connections without a restart.
// A pair that changed but does not load (one file written, the other not
// yet) is logged once for each version of the files, and the certificate
// read before is served until it does: while the files differ from the
// pair last loaded, each look reads them again, since a rewrite need not
// change a file's stamp (a coarse clock, a file made readable).
type servedCert struct {
	certFile, keyFile string
	logger            *log.Logger

	cert    atomic.Pointer[tls.Certificate]
	checked atomic.Int64 // when the files were last looked at, Unix nanoseconds

	// looking is held by the handshake that looks at the files, which
	// the others do not wait for (a file on a hung mount stalls that one
	// handshake alone); it guards the fields below.
	looking sync.Mutex
	loaded  [2]fileStamp // of certFile and keyFile when cert was read
	failing bool         // a read failed since cert was read
	failed  [2]fileStamp // of the two when that read failed, as logged
}

// fileStamp tells a file's versions apart: a file rewritten changes its
// modification time or its size, or both.
type fileStamp struct {
	mod  time.Time
	size int64
}

// certCheckEvery is how often, at most, a handshake looks at whether the
// certificate's files changed.
const certCheckEvery = time.Second

// loadServedCert reads the certificate and key at start-up; an error
// names the flags.
func loadServedCert(certFile, keyFile string, logger *log.Logger) (*servedCert, error) {
	c := &servedCert{certFile: certFile, keyFile: keyFile, logger: logger, loaded: stampsOf(certFile, keyFile)}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", certFile, keyFile, err)
	}
	c.cert.Store(&cert)
	c.checked.Store(time.Now().UnixNano())
	return c, nil
}

// stampsOf stamps the two files; one that cannot be read has the zero
// stamp, which a file that can differs from.
func stampsOf(certFile, keyFile string) [2]fileStamp {
	var s [2]fileStamp
	for i, name := range []string{certFile, keyFile} {
		if fi, err := os.Stat(name); err == nil {
			s[i] = fileStamp{fi.ModTime(), fi.Size()}
		}
	}
	return s
}

// getCertificate is the server's tls.Config.GetCertificate.
func (c *servedCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c.lookDue(time.Now()) && c.looking.TryLock() {
		c.look()
		c.looking.Unlock()
	}
	return c.cert.Load(), nil
}

// lookDue reports whether the files are to be looked at now: certCheckEvery
// has passed since the last look, or the wall clock, which checked keeps,
// was set back since (it is not left to catch up first).
func (c *servedCert) lookDue(now time.Time) bool {
	since := now.UnixNano() - c.checked.Load()
	return since >= int64(certCheckEvery) || since < 0
}

// look reads the files again if they changed, with c.looking held.
func (c *servedCert) look() {
	now := time.Now()
	if !c.lookDue(now) {
		return // another handshake has just looked
	}
	c.checked.Store(now.UnixNano())
	s := stampsOf(c.certFile, c.keyFile)
	if s == c.loaded {
		return
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if !c.failing || s != c.failed {
			c.failing, c.failed = true, s
			c.logger.Printf("--tls-cert %s, --tls-key %s changed but do not load: %v; still serving the certificate read before", c.certFile, c.keyFile, err)
		}
		return
	}
	c.cert.Store(&cert)
	c.loaded, c.failing = s, false
	c.logger.Printf("--tls-cert %s: serving the certificate read again after it changed", c.certFile)
}

// config is the server's TLS configuration: TLS 1.2 or later, HTTP/2
// offered (net/http adds it when it serves TLS).
func (c *servedCert) config() *tls.Config {
	return &tls.Config{GetCertificate: c.getCertificate, MinVersion: tls.VersionTLS12}
}
