module github.com/idemgo/idem/interop/stripe

go 1.26.0

replace github.com/idemgo/idem => ../..

require (
	github.com/idemgo/idem v0.0.0
	github.com/stripe/stripe-go/v85 v85.0.0
)
