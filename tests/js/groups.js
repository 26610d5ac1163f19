// kafkajs consumer groups against a sofakafka broker, driven by tests/integration/test_groups_kafkajs.py.
//
// Usage: node groups.js '<json: {bootstrap, topic, messages}>'
// The topic has six partitions and `messages` records already. Three consumers join one group ("sharing");
// three more consumers each join a group of their own ("broadcast"). The script waits until the sharing
// group's last rebalance gave each member its partitions and every consumer saw what it should, then prints
// one JSON object with the final assignments (GROUP_JOIN events) and the values each consumer received.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: 'sofakafka-kafkajs-groups',
  brokers: [args.bootstrap],
  logLevel: logLevel.WARN,
  retry: { retries: 8 },
})

const startMember = async (name, groupId) => {
  const state = { name, groupId, assignment: null, generations: 0, values: [] }
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 200 })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    state.generations += 1
    state.assignment = (e.payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b)
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ message }) => {
      state.values.push(message.value.toString())
    },
  })
  return { state, consumer }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const main = async () => {
  const members = []
  for (let i = 0; i < 3; i++) members.push(await startMember(`share-${i}`, `${args.topic}-sharing`))
  for (let i = 0; i < 3; i++) members.push(await startMember(`broadcast-${i}`, `${args.topic}-broadcast-${i}`))
  const sharing = members.slice(0, 3)
  const broadcast = members.slice(3)
  const deadline = Date.now() + 90000
  const done = () => {
    const assigned = sharing.map((m) => m.state.assignment || [])
    const evenly = assigned.every((a) => a.length === 2) && new Set(assigned.flat()).size === 6
    const sharedAll = new Set(sharing.flatMap((m) => m.state.values)).size === args.messages
    const broadcastAll = broadcast.every((m) => new Set(m.state.values).size === args.messages)
    return evenly && sharedAll && broadcastAll
  }
  while (!done() && Date.now() < deadline) await sleep(100)
  // Serialized before disconnecting: each departure rebalances the rest and changes their assignments.
  const result = JSON.stringify({ converged: done(), members: members.map((m) => m.state) })
  for (const m of members) await m.consumer.disconnect()
  console.log(result)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
