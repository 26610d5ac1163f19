// franz-go (github.com/twmb/franz-go, the Go client) against a broker: the interop smoke scenario.
//
// Usage: franzgo '<json: {"bootstrap": "host:port", "topic": "...", "group": "..."}>'
//
// Admin (kadm): create a topic of 3 partitions, list it, describe its configs, create partitions; the
// producer: 30 records with keys and headers, synchronously, acks=all, zstd; a consumer group member: reads
// them all, commits, leaves; admin again: the group's committed offsets, the group described and listed,
// the topic deleted. It prints one JSON object of what each step observed (the test compares it between
// sofakafka and Apache Kafka 2.6) and exits non-zero with the error on stderr if a step fails.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type args struct {
	Bootstrap string `json:"bootstrap"`
	Topic     string `json:"topic"`
	Group     string `json:"group"`
}

func main() {
	var a args
	if len(os.Args) != 2 || json.Unmarshal([]byte(os.Args[1]), &a) != nil {
		fmt.Fprintln(os.Stderr, "usage: franzgo '{\"bootstrap\": ..., \"topic\": ..., \"group\": ...}'")
		os.Exit(2)
	}
	out, err := run(a)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}

func run(a args) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	out := map[string]any{}

	admClient, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap))
	if err != nil {
		return nil, err
	}
	defer admClient.Close()
	adm := kadm.NewClient(admClient)

	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("86400000")}, a.Topic)
	if err != nil || created.Err != nil {
		return nil, fmt.Errorf("create topic: %v %v", err, created.Err)
	}
	if err := waitFor(ctx, func() bool {
		td, err := adm.ListTopics(ctx, a.Topic)
		return err == nil && td.Has(a.Topic) && len(td[a.Topic].Partitions) == 3 && allLed(td[a.Topic])
	}); err != nil {
		return nil, fmt.Errorf("topic leaders: %w", err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, a.Topic)
	if err != nil {
		return nil, err
	}
	cfg, err := rc.On(a.Topic, nil)
	if err != nil || cfg.Err != nil {
		return nil, fmt.Errorf("describe configs: %v %v", err, cfg.Err)
	}
	for _, c := range cfg.Configs {
		if c.Key == "retention.ms" {
			out["retentionMs"] = c.MaybeValue() + "@" + c.Source.String()
		}
	}
	existing, err := adm.CreateTopic(ctx, 1, 1, nil, a.Topic)
	out["createExisting"] = errName(err, existing.Err)

	// Produce: keys, headers, zstd, acks=all, synchronously, each record to the partition it names.
	var records []*kgo.Record
	for i := 0; i < 30; i++ {
		records = append(records, &kgo.Record{
			Key: []byte("k" + strconv.Itoa(i)), Value: []byte("franz-go record " + strconv.Itoa(i)),
			Partition: int32(i % 3), Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(strconv.Itoa(i))}},
		})
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.DefaultProduceTopic(a.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	if err := prod.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	produced := map[string][]int64{}
	for _, r := range records {
		p := strconv.Itoa(int(r.Partition))
		produced[p] = append(produced[p], r.Offset)
	}
	out["producedOffsets"] = produced
	prod.Close()

	// A group member: consumes everything, commits, leaves.
	cons, err := kgo.NewClient(kgo.SeedBrokers(a.Bootstrap), kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(a.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return nil, err
	}
	var got []string
	for len(got) < 30 && ctx.Err() == nil {
		fetches := cons.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetch: %v", errs)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			h := ""
			for _, hd := range r.Headers {
				h += hd.Key + "=" + string(hd.Value)
			}
			got = append(got, fmt.Sprintf("%d@%d %s=%s [%s]", r.Partition, r.Offset, r.Key, r.Value, h))
		})
	}
	if len(got) != 30 {
		return nil, fmt.Errorf("consumed %d of 30 records", len(got))
	}
	sort.Strings(got)
	out["consumed"] = got
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	described, err := adm.DescribeGroups(ctx, a.Group)
	if err != nil {
		return nil, err
	}
	g := described[a.Group]
	out["groupWhileMember"] = map[string]any{"state": g.State, "members": len(g.Members), "protocol": g.Protocol}
	cons.Close() // leaves the group

	offsets, err := adm.FetchOffsets(ctx, a.Group)
	if err != nil {
		return nil, err
	}
	committed := map[string]int64{}
	offsets.Each(func(o kadm.OffsetResponse) { committed[strconv.Itoa(int(o.Partition))] = o.At })
	out["committed"] = committed
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out["groupListed"] = listed.Sorted() != nil && func() bool {
		for _, l := range listed.Sorted() {
			if l.Group == a.Group {
				return true
			}
		}
		return false
	}()
	described, err = adm.DescribeGroups(ctx, a.Group)
	if err != nil {
		return nil, err
	}
	out["groupAfterLeave"] = map[string]any{"state": described[a.Group].State, "members": len(described[a.Group].Members)}
	deleted, err := adm.DeleteTopics(ctx, a.Topic)
	if err != nil {
		return nil, err
	}
	out["deleteTopic"] = errName(nil, deleted[a.Topic].Err)
	return out, nil
}

func allLed(t kadm.TopicDetail) bool {
	for _, p := range t.Partitions {
		if p.Leader < 0 || p.Err != nil {
			return false
		}
	}
	return true
}

func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func errName(errs ...error) string {
	for _, e := range errs {
		if e != nil {
			return e.Error()
		}
	}
	return "none"
}
