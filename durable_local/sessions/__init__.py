"""The orchestration session manager of DurableTask.AzureStorage, with its control queues, dedupe and partitioning.

The heart of the engine: it reads the control queues this worker owns, files each message into the session of its
instance or a pending batch, and hands the dispatcher one batch per instance at a time. Each module re-implements one
part of DurableTask.AzureStorage (``docs/durable-protocol.md``, "The session manager", says what they do together):

=====================  ==========================================================================================
module                 DurableTask.AzureStorage
=====================  ==========================================================================================
``manager``            ``OrchestrationSessionManager`` (the seed: Azure/durabletask#1119, with ``MaxHistoryEvents``):
                       ``GetNextSessionAsync``, ``TryGetExistingSession``, ``AddMessageToPendingOrchestration``,
                       ``ScheduleOrchestrationStatePrefetch``, ``TryReleaseSession``, ``AbortAllSessions``
``queue_ownership``    the same class's queue leases and dequeue loops: ``AddQueue``, ``RemoveQueue``,
                       ``ReleaseQueue``, ``ResumeListeningIfOwnQueue``, ``DequeueLoop``
``state``              ``MessageCollection``, ``OrchestrationSessionManager.PendingMessageBatch``,
                       ``Messaging/OrchestrationSession`` (with ``IsOutOfOrderMessage``)
``dedupe``             ``DedupeExecutionStartedMessagesAsync`` and ``IsScheduledAfterInstanceUpdate``
``control_queue``      ``Messaging/ControlQueue`` + ``Messaging/TaskHubQueue`` (batch reads, back-pressure, polling
                       back-off, abandon delays) and the worker's ``PendingOrchestratorMessages`` counter
``partitioning``       ``Fnv1aHashHelper.ComputeHash`` for an instance's partition, and
                       ``AzureStorageOrchestrationService.GetControlQueueName`` / ``GetWorkItemQueueName``
=====================  ==========================================================================================

The storage it runs on (queues, Instances and History tables) is ``durable_local.storage``; the dispatcher that takes
its sessions is ``durable_local.dispatch.orchestration``.
"""
