package privacy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Envelope prefix of sealed content: "ev1:<key id>:<base64url(nonce ‖ ciphertext)>".
// The key id is inside the envelope too, so a row without a key_id column (events)
// still says which key opens it.
const envelopePrefix = "ev1:"

// ErrWrongKey means a sealed value did not authenticate under the key named by its
// id: the configured key is not the one it was sealed with (or the data was
// tampered with). It is never answered with garbage.
var ErrWrongKey = errors.New("content does not authenticate under the configured key (wrong ENGRAM_ENCRYPTION_KEY for this key id, or tampered data)")

// ErrUnknownKey means a row names a key id the keyring does not hold.
var ErrUnknownKey = errors.New("content is sealed with a key that is not configured")

// Keyring seals content with its current key (AES-256-GCM) and opens content
// sealed with any key it holds. It is safe for concurrent use.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	macs    map[string][]byte // HMAC keys for deterministic nonces, derived per key
}

var keyIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// NewKeyring builds a keyring; current names the key new content is sealed with.
// Every key must be 32 bytes.
func NewKeyring(current string, keys map[string][]byte) (*Keyring, error) {
	k := &Keyring{current: current, aeads: map[string]cipher.AEAD{}, macs: map[string][]byte{}}
	for id, key := range keys {
		if !keyIDRe.MatchString(id) {
			return nil, fmt.Errorf("encryption key id %q: use 1–64 letters, digits, '.', '_' or '-'", id)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("encryption key %q is %d bytes, AES-256 needs 32", id, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		k.aeads[id] = aead
		m := hmac.New(sha256.New, key)
		m.Write([]byte("engram deterministic nonce"))
		k.macs[id] = m.Sum(nil)
	}
	if _, ok := k.aeads[current]; !ok {
		return nil, fmt.Errorf("current encryption key %q is not among the keys", current)
	}
	return k, nil
}

// DefaultKeyID names a key by its fingerprint when no id is configured.
func DefaultKeyID(key []byte) string {
	h := sha256.Sum256(key)
	return "k-" + hex.EncodeToString(h[:4])
}

// ParseKeyring builds the keyring from ENGRAM_ENCRYPTION_KEY (raw: base64 of 32
// bytes; the current key), ENGRAM_ENCRYPTION_KEY_ID (id; default k-<fingerprint>)
// and ENGRAM_ENCRYPTION_OLD_KEYS (old: "id:base64,id:base64", keys that only open),
// as config reads them. It returns nil, nil when no key is configured: content is
// then stored in clear. Errors name the variable.
func ParseKeyring(raw, id, old string) (*Keyring, error) {
	raw, id, old = strings.TrimSpace(raw), strings.TrimSpace(id), strings.TrimSpace(old)
	if raw == "" {
		if old != "" {
			return nil, errors.New("ENGRAM_ENCRYPTION_OLD_KEYS is set but ENGRAM_ENCRYPTION_KEY is not: set the current key too")
		}
		return nil, nil
	}
	key, err := decodeKey(raw)
	if err != nil {
		return nil, fmt.Errorf("ENGRAM_ENCRYPTION_KEY: %w", err)
	}
	if id == "" {
		id = DefaultKeyID(key)
	}
	keys := map[string][]byte{id: key}
	for _, part := range strings.Split(old, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		oid, b64, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("ENGRAM_ENCRYPTION_OLD_KEYS: %q is not id:base64key", part)
		}
		ok2, err := decodeKey(b64)
		if err != nil {
			return nil, fmt.Errorf("ENGRAM_ENCRYPTION_OLD_KEYS %s: %w", oid, err)
		}
		if oid == id {
			return nil, fmt.Errorf("ENGRAM_ENCRYPTION_OLD_KEYS: key id %q is the current key's id", oid)
		}
		keys[oid] = ok2
	}
	return NewKeyring(id, keys)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("decodes to %d bytes, AES-256 needs 32 (generate one with `openssl rand -base64 32`)", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("is not base64 (generate one with `openssl rand -base64 32`)")
}

// CurrentID is the id of the key new content is sealed with.
func (k *Keyring) CurrentID() string { return k.current }

// KeyIDs lists the ids the keyring can open.
func (k *Keyring) KeyIDs() []string {
	var ids []string
	for id := range k.aeads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func aad(keyID string) []byte { return []byte("engram/" + keyID) }

// Seal encrypts plaintext with the current key and a random nonce.
func (k *Keyring) Seal(plaintext string) (keyID, sealed string, err error) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", "", err
	}
	return k.current, envelope(k.current, aead.Seal(nonce, nonce, []byte(plaintext), aad(k.current))), nil
}

// SealDeterministic encrypts with a nonce derived from the plaintext (HMAC), so the
// same plaintext always gives the same envelope under one key. It exists for values
// compared for equality after sealing (an event's content is part of its
// idempotency fingerprint); it reveals only that two such values are equal.
func (k *Keyring) SealDeterministic(plaintext string) (keyID, sealed string) {
	aead := k.aeads[k.current]
	m := hmac.New(sha256.New, k.macs[k.current])
	m.Write([]byte(plaintext))
	nonce := m.Sum(nil)[:aead.NonceSize()]
	return k.current, envelope(k.current, aead.Seal(append([]byte(nil), nonce...), nonce, []byte(plaintext), aad(k.current)))
}

func envelope(keyID string, nonceAndCT []byte) string {
	return envelopePrefix + keyID + ":" + base64.RawURLEncoding.EncodeToString(nonceAndCT)
}

// IsSealed reports whether s is a sealed envelope.
func IsSealed(s string) bool { return strings.HasPrefix(s, envelopePrefix) }

// EnvelopeKeyID returns the key id inside an envelope ("" when s is not sealed).
func EnvelopeKeyID(s string) string {
	if !IsSealed(s) {
		return ""
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(s, envelopePrefix), ":")
	return id
}

// Open decrypts content. keyID is the row's key_id column ("" when the row has
// none or was written before encryption): clear text passes through unchanged, an
// envelope is opened with the key it names. A key id the keyring lacks, a
// mismatch between the column and the envelope, or a failed authentication is an
// error — never garbage.
func (k *Keyring) Open(keyID, content string) (string, error) {
	return open(k, keyID, content)
}

// Open decrypts with a possibly nil keyring (no key configured): clear text passes,
// sealed content is an error naming its key.
func Open(k *Keyring, keyID, content string) (string, error) { return open(k, keyID, content) }

func open(k *Keyring, keyID, content string) (string, error) {
	if !IsSealed(content) {
		if keyID != "" {
			return "", fmt.Errorf("row says key %q but its content is not sealed", keyID)
		}
		return content, nil
	}
	rest := strings.TrimPrefix(content, envelopePrefix)
	envID, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", errors.New("malformed sealed content")
	}
	if keyID != "" && keyID != envID {
		return "", fmt.Errorf("row says key %q but its content is sealed with %q", keyID, envID)
	}
	if k == nil {
		return "", fmt.Errorf("%w: key %q (set ENGRAM_ENCRYPTION_KEY, and ENGRAM_ENCRYPTION_OLD_KEYS for older keys)", ErrUnknownKey, envID)
	}
	aead, ok := k.aeads[envID]
	if !ok {
		return "", fmt.Errorf("%w: key %q (configured: %s; add it to ENGRAM_ENCRYPTION_OLD_KEYS)", ErrUnknownKey, envID, strings.Join(k.KeyIDs(), ", "))
	}
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", errors.New("malformed sealed content")
	}
	pt, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], aad(envID))
	if err != nil {
		return "", fmt.Errorf("key %q: %w", envID, ErrWrongKey)
	}
	return string(pt), nil
}
