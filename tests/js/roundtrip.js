// kafkajs against a sofakafka broker, driven by tests/integration/test_kafkajs.py.
//
// Usage: node roundtrip.js '<json: {bootstrap, topic, records: [{key, value, headers, timestamp}]}>'
// Prints one JSON object with what each step observed; the Python test makes the assertions, so a failure
// shows the whole picture. Exits non-zero with the error on stderr if a call throws.
//
// Consuming, twice: kafkajs's own consumer, which is always a group member (FindCoordinator, JoinGroup,
// SyncGroup, Heartbeat, OffsetCommit), and underneath it the client's cluster object and its broker
// connection's Fetch, which reads a given offset range without the group layer (after DeleteRecords).
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: 'sofakafka-kafkajs-test',
  brokers: [args.bootstrap],
  logLevel: logLevel.WARN,
  retry: { retries: 5 },
})

const clusterOf = (client) => {
  const createCluster = Object.getOwnPropertySymbols(client).find((s) =>
    String(s).includes('createCluster')
  )
  return client[createCluster]({})
}

const toWire = (r) => ({
  key: Buffer.from(r.key, 'base64'),
  value: Buffer.from(r.value, 'base64'),
  headers: Object.fromEntries(r.headers.map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  timestamp: String(r.timestamp),
})

const fromWire = (m) => ({
  offset: Number(m.offset),
  key: m.key === null ? null : m.key.toString('base64'),
  value: m.value === null ? null : m.value.toString('base64'),
  headers: Object.entries(m.headers || {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  timestamp: Number(m.timestamp),
})

async function fetchAll (cluster, topic, partition, fromOffset, count) {
  await cluster.addTargetTopic(topic)
  await cluster.refreshMetadata()
  const leaders = cluster.findLeaderForPartitions(topic, [partition])
  const nodeId = Object.keys(leaders)[0]
  const broker = await cluster.findBroker({ nodeId })
  const out = []
  let offset = fromOffset
  while (out.length < count) {
    const response = await broker.fetch({
      replicaId: -1,
      isolationLevel: 1,
      maxWaitTime: 500,
      minBytes: 1,
      maxBytes: 10485760,
      topics: [{ topic, partitions: [{ partition, fetchOffset: String(offset), maxBytes: 10485760 }] }],
    })
    const p = response.responses[0].partitions[0]
    if (p.errorCode !== 0) throw new Error(`fetch error code ${p.errorCode}`)
    for (const m of p.messages) {
      if (Number(m.offset) < offset) continue // a batch may start before the offset asked for
      out.push(fromWire(m))
      offset = Number(m.offset) + 1
    }
  }
  return out
}

async function main () {
  const result = {}
  const { topic } = args
  const admin = kafka.admin()
  await admin.connect()
  try {
    result.created = await admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '86400000' }] }],
      waitForLeaders: true,
    })
    result.listed = (await admin.listTopics()).includes(topic)

    const describe = async () => {
      const d = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false })
      return Object.fromEntries(d.resources[0].configEntries.map((e) => [e.configName, e.configValue]))
    }
    result.configsBefore = await describe()
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '172800000' }] }],
    })
    result.configsAfter = await describe()

    await admin.createPartitions({ topicPartitions: [{ topic, count: 2 }] })
    // Metadata reaches brokers after CreatePartitions answers, in Kafka too: wait (bounded) for it.
    for (let i = 0; i < 100; i++) {
      const meta = await admin.fetchTopicMetadata({ topics: [topic] })
      result.partitions = meta.topics[0].partitions.map((p) => p.partitionId).sort()
      if (result.partitions.length === 2) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }

    const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: false })
    await producer.connect()
    const half = Math.floor(args.records.length / 2)
    const plain = await producer.send({
      topic, acks: -1, messages: args.records.slice(0, half).map((r) => ({ ...toWire(r), partition: 0 })),
    })
    const gzip = await producer.send({
      topic, acks: -1, compression: CompressionTypes.GZIP,
      messages: args.records.slice(half).map((r) => ({ ...toWire(r), partition: 0 })),
    })
    result.produced = [...plain, ...gzip].map((r) => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: Number(r.baseOffset) }))
    await producer.disconnect()

    const groupId = `${topic}-group`
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 500, sessionTimeout: 10000, heartbeatInterval: 1000 })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    const viaGroup = []
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`group consumer got ${viaGroup.length} records`)), 90000)
      consumer.run({
        eachMessage: async ({ partition, message }) => {
          viaGroup.push({ partition, ...fromWire(message) })
          if (viaGroup.length >= args.records.length) {
            clearTimeout(timer)
            resolve()
          }
        },
      }).catch(reject)
    })
    await consumer.disconnect() // commits the offsets it has processed
    result.groupConsumed = viaGroup
    result.groupOffsets = (await admin.fetchOffsets({ groupId, topics: [topic] }))[0].partitions
      .map((p) => ({ partition: p.partition, offset: Number(p.offset) }))
      .sort((a, b) => a.partition - b.partition)

    const cluster = clusterOf(kafka)
    await cluster.connect()
    result.consumed = await fetchAll(cluster, topic, 0, 0, args.records.length)

    const target = args.records[3].timestamp
    result.offsetsByTime = (await admin.fetchTopicOffsetsByTimestamp(topic, target))
      .map((p) => ({ partition: p.partition, offset: Number(p.offset) }))
    result.offsetsBefore = (await admin.fetchTopicOffsets(topic))
      .map((p) => ({ partition: p.partition, low: Number(p.low), high: Number(p.high) }))
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '4' }] })
    result.offsetsAfterDelete = (await admin.fetchTopicOffsets(topic))
      .map((p) => ({ partition: p.partition, low: Number(p.low), high: Number(p.high) }))
    result.consumedAfterDelete = await fetchAll(cluster, topic, 0, 4, args.records.length - 4)
    await cluster.disconnect()

    await admin.deleteTopics({ topics: [topic] })
    // Deletion completes asynchronously in Kafka too: wait (bounded) for the topic to leave the metadata.
    result.listedAfterDelete = true
    for (let i = 0; i < 100 && result.listedAfterDelete; i++) {
      result.listedAfterDelete = (await admin.listTopics()).includes(topic)
      if (result.listedAfterDelete) await new Promise((resolve) => setTimeout(resolve, 200))
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
