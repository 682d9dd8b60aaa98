; kotlin
