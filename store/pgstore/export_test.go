package pgstore

// WaitActive is waitActive, for the tests of package pgstore_test.
var WaitActive = waitActive
