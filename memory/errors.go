package memory

// Error types of Temporal application errors that more than one workflow raises
// and the API maps to invalid_argument. Each feature package adds its own.
const (
	// ErrTypeBadInput: the input can never succeed; non-retryable.
	ErrTypeBadInput = "BadInput"
	// ErrTypeUnknownSchema: the named schema does not exist; non-retryable.
	ErrTypeUnknownSchema = "UnknownSchema"
)

// NonRetryable lists the shared error types retry policies must not retry; the
// write path adds its own (write.NonRetryable).
var NonRetryable = []string{ErrTypeBadInput, ErrTypeUnknownSchema}
