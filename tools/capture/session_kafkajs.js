// One realistic kafkajs session through the capture proxy: admin create/metadata/configs, producers
// (plain, gzip, idempotent), a group consumer from the beginning, offsets, groups, delete.
// kafkajs itself lives in tools/capture-js/node_modules (run with NODE_PATH pointing there).
// Steps may fail against Tansu; the frames are what we keep, so a failure is logged and we go on.
'use strict'

const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require('kafkajs')

const bootstrap = process.argv[2]
const topic = 'capture-kafkajs'
const groupId = 'capture-kafkajs-group'
const failures = []

async function step (name, action) {
  try {
    const result = await action()
    console.log(`ok   ${name}: ${JSON.stringify(result === undefined ? null : result).slice(0, 200)}`)
    return result
  } catch (err) {
    failures.push(name)
    console.log(`FAIL ${name}: ${err && err.stack ? err.stack.split('\n').slice(0, 2).join(' ') : err}`)
    return undefined
  }
}

function messages (label) {
  return [0, 1, 2, 3].map(i => ({
    key: `key-${i % 2}`,
    value: `value ${label} ${i} `.repeat(3),
    headers: { 'trace-id': `t${i}`, codec: label }
  }))
}

async function main () {
  const kafka = new Kafka({
    clientId: 'capture-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 2 }
  })
  const admin = kafka.admin()
  await step('admin connect', () => admin.connect())
  await step('create topic', () => admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }))
  await step('metadata', () => admin.fetchTopicMetadata({ topics: [topic] }))
  const cluster = await step('describe cluster', () => admin.describeCluster())
  const brokerId = cluster ? String(cluster.brokers[0].nodeId) : '0'
  await step('describe configs', () => admin.describeConfigs({
    includeSynonyms: false,
    resources: [
      { type: ConfigResourceTypes.TOPIC, name: topic },
      { type: ConfigResourceTypes.BROKER, name: brokerId }
    ]
  }))

  let sent = 0
  for (const [label, compression] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP]]) {
    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await step(`producer ${label} connect`, () => producer.connect())
    const ok = await step(`produce ${label}`, () => producer.send({ topic, compression, acks: -1, messages: messages(label) }))
    if (ok) sent += 4
    await step(`producer ${label} disconnect`, () => producer.disconnect())
  }
  const idempotent = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await step('idempotent producer connect', () => idempotent.connect())
  const ok = await step('produce idempotent', () => idempotent.send({ topic, acks: -1, messages: messages('idempotent') }))
  if (ok) sent += 4
  await step('idempotent producer disconnect', () => idempotent.disconnect())

  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  await step('consumer connect', () => consumer.connect())
  await step('subscribe', () => consumer.subscribe({ topics: [topic], fromBeginning: true }))
  let received = 0
  await step('consume', () => new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(`timed out after ${received}/${sent}`), 30000)
    consumer.run({
      autoCommit: true,
      eachMessage: async () => {
        received += 1
        if (received >= sent) {
          clearTimeout(timer)
          resolve(`consumed ${received}/${sent}`)
        }
      }
    }).catch(reject)
  }))
  await new Promise(resolve => setTimeout(resolve, 1500)) // a few heartbeats and an auto commit
  await step('consumer disconnect (leave group)', () => consumer.disconnect())

  await step('fetch group offsets', () => admin.fetchOffsets({ groupId, topics: [topic] }))
  await step('fetch topic offsets', () => admin.fetchTopicOffsets(topic))
  await step('offsets by timestamp', () => admin.fetchTopicOffsetsByTimestamp(topic, 0))
  await step('list groups', () => admin.listGroups())
  await step('describe groups', () => admin.describeGroups([groupId]))
  await step('delete topic', () => admin.deleteTopics({ topics: [topic] }))
  await step('admin disconnect', () => admin.disconnect())
  console.log(`failed steps: ${JSON.stringify(failures)}`)
}

main().catch(err => {
  console.error(err)
  process.exitCode = 1
})
