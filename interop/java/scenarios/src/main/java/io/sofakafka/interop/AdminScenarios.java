package io.sofakafka.interop;

import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.describeTopics;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.errorName;
import static io.sofakafka.interop.Ctx.failureOf;
import static io.sofakafka.interop.Ctx.groupState;
import static io.sofakafka.interop.Ctx.waitUntil;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/** The Admin client: topics, partitions, cluster, configs, groups, offsets, records, elections, reassignments. */
final class AdminScenarios {
    private AdminScenarios() {
    }

    static void register() {
        Scenarios.register("admin.topics", AdminScenarios::topics);
        Scenarios.register("admin.cluster", AdminScenarios::cluster);
        Scenarios.register("admin.configs", AdminScenarios::configs);
        Scenarios.register("admin.groups", AdminScenarios::groups);
        Scenarios.register("admin.offsets", AdminScenarios::offsets);
        Scenarios.register("admin.elect_leaders", AdminScenarios::electLeaders);
        Scenarios.register("admin.reassign", AdminScenarios::reassign);
    }

    static Throwable create(Admin a, NewTopic t) throws InterruptedException {
        return failureOf(a.createTopics(List.of(t)).all());
    }

    static void createAndWait(Admin a, String topic, int partitions, short rf, Map<String, String> configs) throws Exception {
        a.createTopics(List.of(new NewTopic(topic, partitions, rf).configs(configs))).all().get();
        waitUntil(() -> {
            try {
                TopicDescription d = describeTopics(a, List.of(topic)).get(topic);
                return d.partitions().size() == partitions && d.partitions().stream().allMatch(p -> p.leader() != null);
            } catch (Exception e) {
                return false;
            }
        }, Duration.ofSeconds(30), "every partition of " + topic + " to have a leader");
        waitEverywhere(a, topic, partitions);
    }

    /**
     * Until every broker's own metadata names a leader for each of the topic's {@code partitions}. With one broker
     * the Admin client's own describe has asked it already; so a scenario on a secured listener (which the plain
     * probe cannot speak) runs against one broker.
     */
    static void waitEverywhere(Admin a, String topic, int partitions) throws Exception {
        Collection<Node> nodes = a.describeCluster().nodes().get();
        if (nodes.size() == 1) return;
        for (Node n : nodes) {
            waitUntil(() -> {
                try {
                    List<Integer> leaders = MetadataProbe.leaders(n.host(), n.port(), topic);
                    return leaders != null && leaders.size() == partitions && leaders.stream().allMatch(l -> l >= 0);
                } catch (java.io.IOException e) {
                    return false;
                }
            }, Duration.ofSeconds(30), "broker " + n.id() + " to know the leaders of " + topic);
        }
    }

    static Object topics(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        int rf = ctx.integer("replicationFactor", 1);
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            int brokers = a.describeCluster().nodes().get().size();
            createAndWait(a, topic, 3, (short) rf, Map.of("cleanup.policy", "compact", "retention.ms", "3600000"));
            TopicDescription d = describeTopics(a, List.of(topic)).get(topic);
            eq(topic, d.name(), "described name");
            eq(false, d.isInternal(), "internal");
            for (TopicPartitionInfo p : d.partitions()) {
                eq(rf, p.replicas().size(), "replicas of partition " + p.partition());
                eq(rf, p.isr().size(), "ISR of partition " + p.partition());
                check(p.replicas().contains(p.leader()), "leader among the replicas");
            }
            check(a.listTopics().names().get().contains(topic), "listTopics names the new topic");
            r.put("createExisting", errorName(create(a, new NewTopic(topic, 1, (short) 1))));
            r.put("createReplicationFactorAboveBrokers", errorName(create(a, new NewTopic(topic + "-rf", 1, (short) (brokers + 1)))));
            r.put("createInvalidConfigValue", errorName(create(a, new NewTopic(topic + "-cfg", 1, (short) 1).configs(Map.of("cleanup.policy", "bogus")))));
            r.put("createUnknownConfig", errorName(create(a, new NewTopic(topic + "-unk", 1, (short) 1).configs(Map.of("no.such.config", "1")))));
            r.put("createZeroPartitions", errorName(create(a, new NewTopic(topic + "-zero", 0, (short) 1))));
            r.put("createInvalidName", errorName(create(a, new NewTopic("bad/name", 1, (short) 1))));
            String validateOnly = topic + "-validate";
            a.createTopics(List.of(new NewTopic(validateOnly, 2, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
            r.put("validateOnlyCreated", a.listTopics().names().get().contains(validateOnly));
            a.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            waitUntil(() -> {
                try {
                    return describeTopics(a, List.of(topic)).get(topic).partitions().size() == 5;
                } catch (Exception e) {
                    return false;
                }
            }, Duration.ofSeconds(30), "5 partitions");
            waitEverywhere(a, topic, 5);
            r.put("partitionsAfterIncrease", 5);
            r.put("createPartitionsDecrease", errorName(failureOf(a.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all())));
            r.put("createPartitionsSame", errorName(failureOf(a.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all())));
            r.put("createPartitionsUnknownTopic", errorName(failureOf(a.createPartitions(Map.of(topic + "-none", NewPartitions.increaseTo(5))).all())));
            Throwable describeMissing = null;
            try {
                describeTopics(a, List.of(topic + "-none"));
            } catch (java.util.concurrent.ExecutionException e) {
                describeMissing = e.getCause();
            }
            r.put("describeUnknownTopic", errorName(describeMissing));
            a.deleteTopics(List.of(topic)).all().get();
            waitUntil(() -> {
                try {
                    return !a.listTopics().names().get().contains(topic);
                } catch (Exception e) {
                    return false;
                }
            }, Duration.ofSeconds(30), "the deleted topic to leave listTopics");
            r.put("deleteUnknownTopic", errorName(failureOf(a.deleteTopics(List.of(topic + "-none")).all())));
        }
        return r;
    }

    static Object cluster(Ctx ctx) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            var dc = a.describeCluster();
            Collection<Node> nodes = dc.nodes().get();
            Node controller = dc.controller().get();
            String clusterId = dc.clusterId().get();
            check(clusterId != null && !clusterId.isEmpty(), "a cluster id");
            check(nodes.stream().anyMatch(n -> n.id() == controller.id()), "the controller is one of the nodes");
            for (Node n : nodes) check(n.port() > 0 && n.host() != null, "node " + n + " has an address");
            r.put("nodes", nodes.size());
            r.put("controllerIsANode", true);
        }
        return r;
    }

    static Map<String, Object> entry(ConfigEntry e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("value", e.value());
        m.put("source", String.valueOf(e.source()));
        m.put("isDefault", e.isDefault());
        m.put("isReadOnly", e.isReadOnly());
        m.put("isSensitive", e.isSensitive());
        return m;
    }

    static Config describe(Admin a, ConfigResource res, boolean synonyms) throws Exception {
        return a.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(synonyms)).all().get().get(res);
    }

    static String incremental(Admin a, ConfigResource res, AlterConfigOp... ops) throws InterruptedException {
        return errorName(failureOf(a.incrementalAlterConfigs(Map.of(res, List.of(ops))).all()));
    }

    static AlterConfigOp op(String key, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(key, value), type);
    }

    /** Admin.alterConfigs (the legacy, replace-everything API): deprecated since 2.3, gone in 4.0. */
    static String legacyAlter(Admin a, ConfigResource res, Map<String, String> entries) throws Exception {
        Method m;
        try {
            m = Admin.class.getMethod("alterConfigs", Map.class);
        } catch (NoSuchMethodException gone) {
            return "notInThisClient";
        }
        List<ConfigEntry> list = new ArrayList<>();
        entries.forEach((k, v) -> list.add(new ConfigEntry(k, v)));
        Object result = m.invoke(a, Map.of(res, new Config(list)));
        return errorName(failureOf((KafkaFuture<?>) result.getClass().getMethod("all").invoke(result)));
    }

    static Object configs(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        List<String> brokerKeys = ctx.strings("brokerKeys");
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of("retention.ms", "3600000"));
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config c = describe(a, res, false);
            Map<String, Object> described = new TreeMap<>();
            int synonymsNotAsked = 0;
            for (ConfigEntry e : c.entries()) {
                described.put(e.name(), entry(e));
                synonymsNotAsked += e.synonyms().size();
            }
            r.put("topicConfigs", described);
            r.put("topicSynonymsWhenNotAsked", synonymsNotAsked);
            Config withSynonyms = describe(a, res, true);
            List<String> retentionSynonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : withSynonyms.get("retention.ms").synonyms()) {
                retentionSynonyms.add(s.name() + "=" + s.value() + "@" + s.source());
            }
            r.put("retentionSynonyms", retentionSynonyms);

            r.put("incrementalSet", incremental(a, res, op("retention.ms", "7200000", AlterConfigOp.OpType.SET)));
            r.put("afterSet", entry(describe(a, res, false).get("retention.ms")));
            r.put("incrementalAppend", incremental(a, res, op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)));
            r.put("afterAppend", describe(a, res, false).get("cleanup.policy").value());
            r.put("incrementalSubtract", incremental(a, res, op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT)));
            r.put("afterSubtract", describe(a, res, false).get("cleanup.policy").value());
            r.put("incrementalDelete", incremental(a, res, op("retention.ms", null, AlterConfigOp.OpType.DELETE)));
            r.put("afterDelete", entry(describe(a, res, false).get("retention.ms")));
            r.put("incrementalInvalidValue", incremental(a, res, op("retention.ms", "soon", AlterConfigOp.OpType.SET)));
            r.put("incrementalUnknownKey", incremental(a, res, op("no.such.config", "1", AlterConfigOp.OpType.SET)));
            r.put("incrementalAppendToNonList", incremental(a, res, op("retention.ms", "1", AlterConfigOp.OpType.APPEND)));
            r.put("legacyAlter", legacyAlter(a, res, Map.of("max.message.bytes", "2000000")));
            if (!"notInThisClient".equals(r.get("legacyAlter"))) {
                Config after = describe(a, res, false);
                r.put("afterLegacyAlter", List.of(entry(after.get("max.message.bytes")), entry(after.get("cleanup.policy"))));
            }
            r.put("legacyAlterInvalidValue", legacyAlter(a, res, Map.of("max.message.bytes", "big")));

            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, topic + "-none");
            r.put("describeUnknownTopic", errorName(failureOf(a.describeConfigs(List.of(missing)).all())));
            r.put("incrementalUnknownTopic", incremental(a, missing, op("retention.ms", "1000", AlterConfigOp.OpType.SET)));
            r.put("legacyAlterUnknownTopic", legacyAlter(a, missing, Map.of("retention.ms", "1000")));

            String brokerId = String.valueOf(a.describeCluster().controller().get().id());
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, brokerId);
            Config bc = describe(a, broker, false);
            int brokerSynonyms = 0;
            for (ConfigEntry e : bc.entries()) brokerSynonyms += e.synonyms().size();
            r.put("brokerSynonymsWhenNotAsked", brokerSynonyms);
            Map<String, Object> brokerEntries = new TreeMap<>();
            for (String k : List.of("num.partitions", "log.retention.hours", "message.max.bytes", "log.cleaner.threads")) {
                ConfigEntry e = bc.get(k);
                brokerEntries.put(k, e == null ? null : entry(e));
            }
            r.put("brokerConfigs", brokerEntries);
            Map<String, Object> perBroker = new TreeMap<>();
            Map<String, Object> clusterDefault = new TreeMap<>();
            ConfigResource allBrokers = new ConfigResource(ConfigResource.Type.BROKER, "");
            for (String k : brokerKeys) {
                ConfigEntry current = bc.get(k);
                String value = current != null && current.value() != null ? current.value() : "1";
                perBroker.put(k, incremental(a, broker, op(k, value, AlterConfigOp.OpType.SET)));
                clusterDefault.put(k, incremental(a, allBrokers, op(k, value, AlterConfigOp.OpType.SET)));
                incremental(a, broker, op(k, null, AlterConfigOp.OpType.DELETE));
                incremental(a, allBrokers, op(k, null, AlterConfigOp.OpType.DELETE));
            }
            r.put("incrementalBrokerKeys", perBroker);
            r.put("incrementalClusterDefaultKeys", clusterDefault);
            r.put("incrementalBrokerReadOnlyKey", incremental(a, broker, op("broker.id", brokerId, AlterConfigOp.OpType.SET)));
        }
        return r;
    }

    static Object groups(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String group = ctx.str("group");
        Map<String, Object> r = new LinkedHashMap<>();
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 2, ctx.rf(), Map.of());
            try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of())) {
                for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(topic, i % 2, null, ("v" + i).getBytes())).get();
            }
            Map<String, Object> group2 = Map.of("group.id", group);
            try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(group2)) {
                c.subscribe(List.of(topic));
                int seen = 0;
                long deadline = System.currentTimeMillis() + 60000;
                while (seen < 10 && System.currentTimeMillis() < deadline) seen += c.poll(Duration.ofMillis(200)).count();
                eq(10, seen, "records consumed by the group");
                // While the member is there the group is Stable and cannot be deleted.
                ConsumerGroupDescription live = a.describeConsumerGroups(List.of(group)).all().get().get(group);
                r.put("liveState", groupState(live));
                r.put("liveMembers", live.members().size());
                r.put("liveAssignor", live.partitionAssignor());
                Set<TopicPartition> assigned = new HashSet<>();
                for (MemberDescription m : live.members()) assigned.addAll(m.assignment().topicPartitions());
                eq(Set.of(tp0, tp1), assigned, "the member's assignment as described");
                r.put("deleteLiveGroup", errorName(failureOf(a.deleteConsumerGroups(List.of(group)).all())));
                c.commitSync();
            }
            Collection<ConsumerGroupListing> listed = a.listConsumerGroups().all().get();
            r.put("listed", listed.stream().anyMatch(g -> g.groupId().equals(group) && !g.isSimpleConsumerGroup()));
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
            r.put("emptyState", groupState(d));
            r.put("emptyMembers", d.members().size());
            Map<TopicPartition, OffsetAndMetadata> committed = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            eq(5L, committed.get(tp0).offset(), "committed offset of partition 0");
            eq(5L, committed.get(tp1).offset(), "committed offset of partition 1");
            a.alterConsumerGroupOffsets(group, Map.of(tp0, new OffsetAndMetadata(1, "moved"))).all().get();
            committed = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            eq(1L, committed.get(tp0).offset(), "altered offset");
            eq("moved", committed.get(tp0).metadata(), "altered offset's metadata");
            a.deleteConsumerGroupOffsets(group, Set.of(tp1)).all().get();
            committed = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            r.put("afterOffsetDelete", new TreeMap<>(Map.of("partitions", committed.keySet().size())));
            String ghost = group + "-none";
            ConsumerGroupDescription none = a.describeConsumerGroups(List.of(ghost)).all().get().get(ghost);
            r.put("unknownGroupState", groupState(none));
            r.put("unknownGroupOffsets", a.listConsumerGroupOffsets(ghost).partitionsToOffsetAndMetadata().get().size());
            a.deleteConsumerGroups(List.of(group)).all().get();
            r.put("listedAfterDelete", a.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
            r.put("deleteAgain", errorName(failureOf(a.deleteConsumerGroups(List.of(group)).all())));
        }
        return r;
    }

    static Object offsets(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 100_000;
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
            try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of())) {
                for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(topic, 0, base + i * 1000L, null, ("v" + i).getBytes())).get();
            }
            Map<String, Object> found = new LinkedHashMap<>();
            Map<String, OffsetSpec> specs = new LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("atFifth", OffsetSpec.forTimestamp(base + 5000));
            specs.put("betweenFifthAndSixth", OffsetSpec.forTimestamp(base + 5500));
            specs.put("beforeAll", OffsetSpec.forTimestamp(base - 1));
            specs.put("afterAll", OffsetSpec.forTimestamp(base + 3_600_000));
            for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
                ListOffsetsResult.ListOffsetsResultInfo info = a.listOffsets(Map.of(tp, e.getValue())).partitionResult(tp).get();
                Map<String, Object> one = new LinkedHashMap<>();
                one.put("offset", info.offset());
                one.put("timestampRelative", info.timestamp() < 0 ? info.timestamp() : info.timestamp() - base);
                found.put(e.getKey(), one);
            }
            r.put("listOffsets", found);
            long low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).lowWatermarks().get(tp).get().lowWatermark();
            r.put("lowWatermark", low);
            r.put("earliestAfterDelete", a.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset());
            r.put("deleteBeyondEnd", errorName(failureOf(a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(100))).lowWatermarks().get(tp))));
            r.put("deleteToEnd", a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(tp).get().lowWatermark());
        }
        return r;
    }

    static Object electLeaders(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            int brokers = a.describeCluster().nodes().get().size();
            createAndWait(a, topic, 2, (short) Math.min(brokers, 3), Map.of());
            Set<TopicPartition> tps = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            for (ElectionType type : ElectionType.values()) {
                Map<TopicPartition, Optional<Throwable>> res = a.electLeaders(type, tps).partitions().get();
                Map<String, Object> per = new TreeMap<>();
                res.forEach((tp, err) -> per.put(String.valueOf(tp.partition()), errorName(err.orElse(null))));
                r.put(type.name().toLowerCase(), per);
            }
            Throwable unknown = failureOf(a.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(topic + "-none", 0))).partitions());
            if (unknown == null) {
                Map<TopicPartition, Optional<Throwable>> res = a.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(topic + "-none", 0))).partitions().get();
                unknown = res.values().iterator().next().orElse(null);
            }
            r.put("unknownPartition", errorName(unknown));
        }
        return r;
    }

    static Object reassign(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin a = ctx.admin()) {
            List<Integer> nodeIds = new ArrayList<>();
            for (Node n : a.describeCluster().nodes().get()) nodeIds.add(n.id());
            nodeIds.sort(null);
            createAndWait(a, topic, 1, (short) 1, Map.of());
            Map<TopicPartition, PartitionReassignment> ongoing = a.listPartitionReassignments().reassignments().get();
            r.put("ongoingBefore", ongoing.containsKey(tp));
            int current = describeTopics(a, List.of(topic)).get(topic).partitions().get(0).replicas().get(0).id();
            int target = nodeIds.stream().filter(id -> id != current).findFirst().orElse(current);
            a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(target))))).all().get();
            waitUntil(() -> {
                try {
                    List<Node> replicas = describeTopics(a, List.of(topic)).get(topic).partitions().get(0).replicas();
                    return replicas.size() == 1 && replicas.get(0).id() == target
                        && !a.listPartitionReassignments().reassignments().get().containsKey(tp);
                } catch (Exception e) {
                    return false;
                }
            }, Duration.ofSeconds(60), "the partition to move to broker " + target);
            r.put("moved", target != current);
            r.put("toUnknownBroker", errorName(failureOf(a.alterPartitionReassignments(
                Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(9999))))).all())));
            r.put("cancelWithNoneOngoing", errorName(failureOf(a.alterPartitionReassignments(Map.of(tp, Optional.empty())).all())));
            r.put("unknownTopic", errorName(failureOf(a.alterPartitionReassignments(
                Map.of(new TopicPartition(topic + "-none", 0), Optional.of(new NewPartitionReassignment(List.of(target))))).all())));
        }
        return r;
    }
}
