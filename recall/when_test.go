package recall

import (
	"testing"
	"time"
)

func TestDateWindow(t *testing.T) {
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	d := func(y, m, dd int) time.Time { return time.Date(y, time.Month(m), dd, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		q        string
		from, to time.Time
	}{
		{"What did Gina find for her clothing store on 1 February, 2023?", d(2023, 1, 31), d(2023, 2, 3)},
		{"What kind of experience did Jon get on May 23, 2023?", d(2023, 5, 22), d(2023, 5, 25)},
		{"What painting did Melanie show on October 13th 2023?", d(2023, 10, 12), d(2023, 10, 15)},
		{"What workout class did Maria start in December 2023?", d(2023, 12, 1), d(2024, 1, 8)},
		{"What did Nate undergo in April, 2022?", d(2022, 4, 1), d(2022, 5, 8)},
		{"What did I say on 2024-02-29?", d(2024, 2, 28), d(2024, 3, 2)},
		{"我2023年5月说过什么", d(2023, 5, 1), d(2023, 6, 8)},
		{"5月3日的预算是多少", d(2023, 5, 2), d(2023, 5, 5)},                           // May 3rd is after now: last year's
		{"2月3号订的酒店", d(2024, 2, 2), d(2024, 2, 5)},                             // this year's
		{"When did Melanie go camping in June?", d(2023, 6, 1), d(2023, 7, 8)}, // June is after now
		{"What happened in January?", d(2024, 1, 1), d(2024, 2, 8)},
		{"the 3rd of March", d(2024, 3, 2), d(2024, 3, 5)},
		{"Which country did James visit in 2021?", d(2021, 1, 1), d(2022, 1, 8)},
		{"去年2022年的旅行", d(2022, 1, 1), d(2023, 1, 8)},
	}
	for _, c := range cases {
		from, to, ok := dateWindow(c.q, now)
		if !ok || !from.Equal(c.from) || !to.Equal(c.to) {
			t.Errorf("%q: window %v %v %v, want %v to %v", c.q, ok, from, to, c.from, c.to)
		}
	}
	for _, q := range []string{
		"May I ask what the budget is?", "She may go camping", "What did I march for?",
		"How many of the 2000 pages did she read?", "Where did I leave the 31 keys?", "On 31 February, 2023?",
	} {
		if from, to, ok := dateWindow(q, now); ok {
			t.Errorf("%q: window %v to %v, want none", q, from, to)
		}
	}
}

func TestAsksWhen(t *testing.T) {
	for _, q := range []string{
		"When did Priya start the pottery class?", "when was the move", "How long has Tom been rowing?",
		"Which year did Sofia open the bakery?", "What month is the wedding?", "Since when does he cycle to work?",
		"How many years did they live in Lyon?", "So when is the recital?", "Kenji moved when did you say?",
		"我什么时候订的机票", "她哪年去的杭州", "预算用了多久",
	} {
		if !asksWhen(q) {
			t.Errorf("%q: not read as asking when", q)
		}
	}
	for _, q := range []string{
		"What did Maya say when the train was late?", "Where did Tom buy the boat?", "What does Sofia think of whenever?",
		"Who went to the lake last week?", "我的预算是多少",
	} {
		if asksWhen(q) {
			t.Errorf("%q: read as asking when", q)
		}
	}
}

func TestNamesTime(t *testing.T) {
	for _, s := range []string{
		"finally signed up yesterday!!", "I've been rowing for a month now", "we moved there three years ago",
		"the recital is next Friday 🎻", "back in 2019 I lived in Porto", "last summer was wild", "in May we went hiking",
		"a couple of weeks, maybe", "上周刚搬完家", "三年前开的店", "5月3日出发",
	} {
		if !namesTime(s) {
			t.Errorf("%q: names no time, it says", s)
		}
	}
	for _, s := range []string{
		"I may try pottery", "lol that's so you", "the bakery smells amazing", "we march on", "I love the idea of a boat",
		"我喜欢靠窗的座位",
	} {
		if namesTime(s) {
			t.Errorf("%q: names a time, it says", s)
		}
	}
}
