package main

import (
	"crypto/tls"
	"fmt"
	"log"
	"os"
	"sync"
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

	mu      sync.Mutex
	cert    *tls.Certificate
	loaded  [2]fileStamp // of certFile and keyFile when cert was read
	failing bool         // a read failed since cert was read
	failed  [2]fileStamp // of the two when that read failed, as logged
	checked time.Time    // when the files were last looked at
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
	c.cert, c.checked = &cert, time.Now()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := time.Now(); now.Sub(c.checked) >= certCheckEvery {
		c.checked = now
		if s := stampsOf(c.certFile, c.keyFile); s != c.loaded {
			if cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile); err != nil {
				if !c.failing || s != c.failed {
					c.failing, c.failed = true, s
					c.logger.Printf("--tls-cert %s, --tls-key %s changed but do not load: %v; still serving the certificate read before", c.certFile, c.keyFile, err)
				}
			} else {
				c.cert, c.loaded, c.failing = &cert, s, false
				c.logger.Printf("--tls-cert %s: serving the certificate read again after it changed", c.certFile)
			}
		}
	}
	return c.cert, nil
}

// config is the server's TLS configuration: TLS 1.2 or later, HTTP/2
// offered (net/http adds it when it serves TLS).
func (c *servedCert) config() *tls.Config {
	return &tls.Config{GetCertificate: c.getCertificate, MinVersion: tls.VersionTLS12}
}
