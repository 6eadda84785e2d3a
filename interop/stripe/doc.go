// Package stripeinterop checks idemhttp against a real client that retries
// on its own: Stripe's official Go SDK (github.com/stripe/stripe-go).
//
// The SDK sends an Idempotency-Key it generates itself on every POST and
// reuses it when it retries a request that failed on the network. Its tests
// put idemhttp.NewProxy in front of a fake Stripe-like API, and a relay
// between the SDK and the proxy that loses the first response; the SDK's own
// retry must then get the recorded response back, with the API having run
// once (conformance statement H22 in CONFORMANCE.md).
//
// This package is a module of its own, with tests only, so that the SDK
// never becomes a dependency of the main module, not even a test-only one.
// Run its tests from this directory (make go-test does so).
package stripeinterop
