package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// certPairPEM makes a self-signed certificate of serial and its key, PEM.
func certPairPEM(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// TestServedCertLoadsAPairThatFailedOnceWhenItLoads: a changed pair that
// did not load when looked at (the certificate written, its key not yet)
// is read again at the next look even when neither file's modification
// time or size tells the key's rewrite apart (a file system whose clock
// ticks coarser than the two writes): the renewed certificate is served
// once it loads, not the old one until the files change again.
func TestServedCertLoadsAPairThatFailedOnceWhenItLoads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(name string, b []byte, mod time.Time) { t.Helper(); writeStamped(t, name, b, mod) }
	tick := time.Now().Truncate(time.Second)
	certA, keyA := certPairPEM(t, 1)
	write(certFile, certA, tick)
	write(keyFile, keyA, tick)
	c, err := loadServedCert(certFile, keyFile, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	look := func() int64 {
		t.Helper()
		c.checked.Store(0) // the next handshake looks at the files
		cert, err := c.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.Int64()
	}
	certB, keyB := certPairPEM(t, 2)
	if len(keyB) != len(keyA) {
		t.Fatalf("keys of %d and %d bytes; the test needs them alike", len(keyA), len(keyB))
	}
	write(certFile, certB, tick.Add(time.Second)) // the key not yet written
	if got := look(); got != 1 {
		t.Fatalf("serving serial %d while the key is the old one; want 1", got)
	}
	write(keyFile, keyB, tick) // the same size and, on a coarse clock, time
	if got := look(); got != 2 {
		t.Errorf("serving serial %d once the renewed pair loads; want 2", got)
	}
}

// TestServedCertHandshakesDoNotWaitForALook: while one handshake looks at
// the certificate's files (stalled on a hung mount, say), the others are
// served the certificate read before without waiting for it.
func TestServedCertHandshakesDoNotWaitForALook(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certA, keyA := certPairPEM(t, 1)
	if err := os.WriteFile(certFile, certA, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyA, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadServedCert(certFile, keyFile, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	c.looking.Lock() // a look under way that does not end
	defer c.looking.Unlock()
	c.checked.Store(0)
	done := make(chan *tls.Certificate)
	go func() {
		cert, _ := c.getCertificate(nil)
		done <- cert
	}()
	select {
	case cert := <-done:
		if cert != c.cert.Load() {
			t.Error("a handshake during a look got another certificate than the one read before")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a handshake waited for another's look at the files")
	}
}

// TestServedCertLooksAfterTheClockWasSetBack: a wall clock set back (by
// NTP stepping it, say) after a look does not keep the next handshakes
// from looking at the certificate's files until it catches up again: a
// certificate renewed meanwhile is served at the next look.
func TestServedCertLooksAfterTheClockWasSetBack(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(name string, b []byte, mod time.Time) { t.Helper(); writeStamped(t, name, b, mod) }
	old := time.Now().Add(-time.Minute)
	certA, keyA := certPairPEM(t, 1)
	write(certFile, certA, old)
	write(keyFile, keyA, old)
	c, err := loadServedCert(certFile, keyFile, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	// The last look, as the clock read then: an hour ahead of the clock
	// as it reads now, set back since.
	c.checked.Store(time.Now().Add(time.Hour).UnixNano())
	certB, keyB := certPairPEM(t, 2)
	write(certFile, certB, time.Now())
	write(keyFile, keyB, time.Now())
	cert, err := c.getCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := leaf.SerialNumber.Int64(); got != 2 {
		t.Errorf("serving serial %d after the clock was set back; want the renewed 2", got)
	}
}

// writeStamped writes b to the file name, modified at mod.
func writeStamped(t *testing.T, name string, b []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, mod, mod); err != nil {
		t.Fatal(err)
	}
}
