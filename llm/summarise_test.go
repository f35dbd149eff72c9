package llm

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/engramhq/engram/internal/fakeopenai"
)

var conversation = []string{
	"user: 你好",
	"agent: 您好，请问有什么可以帮您？",
	"user: 我的订单12345没收到，已经等了一个星期了。",
	"agent: 抱歉，我来帮您查询订单12345的物流。",
	"user: 好的",
	"user: 另外这次旅行预算调整到10000元。我以后尽量都坐直飞。",
	"user: thanks",
}

func TestExtractiveSummariserKeepsInformativeSentences(t *testing.T) {
	s := NewExtractiveSummariser(80)
	var _ Summariser = s
	got, err := s.Summarise(context.Background(), conversation, "")
	require.NoError(t, err)
	t.Log(got)
	assert.LessOrEqual(t, utf8.RuneCountInString(got), 80)
	assert.NotContains(t, got, "您好")
	assert.Contains(t, got, "没收到", "the user's own statement wins over the agent restating it")
	assert.Contains(t, got, "直飞")
	assert.Contains(t, got, "12345")
	assert.Contains(t, got, "10000")
	assert.NotContains(t, got, "你好")
	assert.NotContains(t, got, "thanks")
	assert.NotContains(t, got, "user: 好的")
	// Original order is kept: the order comes before the budget.
	assert.Less(t, strings.Index(got, "12345"), strings.Index(got, "10000"))
}

func TestExtractiveSummariserBounded(t *testing.T) {
	var turns []string
	for i := range 200 {
		turns = append(turns, "The customer asked again about order 12345 and the delivery date, attempt "+strings.Repeat("x", i%7)+".")
		turns = append(turns, "客户第"+string(rune('一'+i%9))+"次询问了航班和酒店的安排以及预算。")
	}
	for _, limit := range []int{40, 100, 300} {
		got, err := NewExtractiveSummariser(limit).Summarise(context.Background(), turns, "")
		require.NoError(t, err)
		assert.LessOrEqual(t, utf8.RuneCountInString(got), limit)
		assert.NotEmpty(t, got)
	}
	// Default bound.
	got, err := NewExtractiveSummariser(0).Summarise(context.Background(), turns, "")
	require.NoError(t, err)
	assert.LessOrEqual(t, utf8.RuneCountInString(got), DefaultSummaryRunes)
}

func TestExtractiveSummariserDropsRepetition(t *testing.T) {
	turns := []string{
		"I prefer direct flights.", "I prefer direct flights.", "I prefer direct flights!",
		"My budget for this trip is 10000 CNY.",
	}
	got, err := NewExtractiveSummariser(200).Summarise(context.Background(), turns, "")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(got, "direct flights"), got)
	assert.Contains(t, got, "10000 CNY")
}

func TestExtractiveSummariserRolls(t *testing.T) {
	s := NewExtractiveSummariser(200)
	first, err := s.Summarise(context.Background(), []string{"user: 我的订单12345没收到。"}, "")
	require.NoError(t, err)
	second, err := s.Summarise(context.Background(), []string{"user: I prefer an aisle seat on long flights."}, first)
	require.NoError(t, err)
	assert.Contains(t, second, "12345", "what the previous summary held survives")
	assert.Contains(t, second, "aisle seat")

	// Nothing new: the previous summary stands.
	same, err := s.Summarise(context.Background(), nil, second)
	require.NoError(t, err)
	assert.Equal(t, second, same)
	empty, err := s.Summarise(context.Background(), []string{"ok", "好的"}, "")
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestExtractiveSummariserDeterministic(t *testing.T) {
	a, _ := NewExtractiveSummariser(100).Summarise(context.Background(), conversation, "")
	b, _ := NewExtractiveSummariser(100).Summarise(context.Background(), conversation, "")
	assert.Equal(t, a, b)
}

func TestExtractiveSummariserLongSentence(t *testing.T) {
	long := strings.Repeat("预算和航班偏好", 50)
	got, err := NewExtractiveSummariser(30).Summarise(context.Background(), []string{long}, "")
	require.NoError(t, err)
	assert.Equal(t, 30, utf8.RuneCountInString(got))
	assert.True(t, strings.HasSuffix(got, "…"))
}

func TestSummarySentences(t *testing.T) {
	assert.Equal(t, []string{"预算3.5万元。", "好！", "Price is 3.5 USD.", "Done?"},
		summarySentences("预算3.5万元。好！Price is 3.5 USD. Done?"))
}

func TestOpenAISummariser(t *testing.T) {
	srv := newFake(t, fakeopenai.Script{Queue: []fakeopenai.Response{
		fakeopenai.Raw("  用户订单12345未收到；本次旅行预算10000元；偏好直飞。  "),
		fakeopenai.Raw(strings.Repeat("长", 500)),
		fakeopenai.Status(500),
	}})
	s, err := NewOpenAISummariser(OpenAIConfig{BaseURL: srv.BaseURL(), Model: "m", Timeout: time.Second}, 100)
	require.NoError(t, err)
	var _ Summariser = s

	got, err := s.Summarise(context.Background(), conversation, "之前的摘要")
	require.NoError(t, err)
	assert.Equal(t, "用户订单12345未收到；本次旅行预算10000元；偏好直飞。", got)
	p := srv.ChatRequests()[0].Prompt()
	assert.Contains(t, p, "之前的摘要")
	assert.Contains(t, p, "我的订单12345没收到")
	assert.Contains(t, p, "at most 100 characters")

	got, err = s.Summarise(context.Background(), conversation, "")
	require.NoError(t, err)
	assert.Equal(t, 100, utf8.RuneCountInString(got), "cut to the bound when the model ignores it")

	_, err = s.Summarise(context.Background(), conversation, "")
	var ce *CallError
	require.ErrorAs(t, err, &ce)
	assert.True(t, ce.Retryable)

	got, err = s.Summarise(context.Background(), nil, "kept")
	require.NoError(t, err)
	assert.Equal(t, "kept", got)
	assert.Equal(t, 3, srv.ChatCalls(), "no call without new turns")
}
