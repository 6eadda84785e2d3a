package idem

// Test helpers of the internal tests that the external ones (package
// idem_test) use too.

// JSONDepth is depthOf: the deepest bracket nesting outside strings.
var JSONDepth = depthOf
